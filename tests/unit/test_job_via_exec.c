/*
 * tests/unit/test_job_via_exec.c - test_job_local.c's specification of the
 * job API again, with every node supervisor a `herd exec --stdio` child
 * (HERD_LAUNCH_VIA_EXEC=1): the launcher's channel path and the node
 * protocol that the ssh and Slurm backends use, without a remote host.
 */
#define TEST_JOB_VIA_EXEC 1
#include "test_job_local.c"
