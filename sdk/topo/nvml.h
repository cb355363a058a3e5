/*
 * sdk/topo/nvml.h - NVML, loaded at run time with dlopen so that libherd
 * has no link-time dependency on the driver and runs where there is none.
 * One loader (nvml.c) for every user of NVML in libherd: discovery and
 * herd health (nvml.c), telemetry (sdk/telemetry/gpu.c).  Internal to
 * libherd.
 *
 * The NVML types used are declared here by hand, with the ABI of nvml.h
 * (NVML API version 12; values and layouts as nvml.h gives them, cited
 * where they are declared).  Entry points newer than the oldest driver
 * herd supports are optional: NULL in a session whose driver lacks them,
 * and HERD__NVML_CALL answers NVML_ERROR_FUNCTION_NOT_FOUND for those.
 */
#ifndef HERD_TOPO_NVML_H
#define HERD_TOPO_NVML_H

#include <stdbool.h>
#include <stddef.h>

#include "herd/node.h"

typedef enum nvmlReturn_enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
	NVML_ERROR_GPU_IS_LOST = 15
} nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef enum nvmlEnableState_enum {
	NVML_FEATURE_DISABLED = 0,
	NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;
typedef enum nvmlIntNvLinkDeviceType_enum {
	NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
	NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
	NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
	NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;

/* The enumerations' values used (nvml.h: nvmlMemoryErrorType_t,
 * nvmlEccCounterType_t, nvmlTemperatureSensors_t,
 * nvmlTemperatureThresholds_t, nvmlClockType_t, nvmlPcieUtilCounter_t). */
enum {
	NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
	NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
	NVML_VOLATILE_ECC = 0,
	NVML_AGGREGATE_ECC = 1,
	NVML_TEMPERATURE_GPU = 0,
	NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
	NVML_CLOCK_SM = 1,
	NVML_CLOCK_MEM = 2,
	NVML_PCIE_UTIL_TX_BYTES = 0,
	NVML_PCIE_UTIL_RX_BYTES = 1
};

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

/* nvml.h: #define NVML_VALUE_NOT_AVAILABLE (-1), in an unsigned long long. */
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ull)

typedef struct nvmlPciInfo_st {
	char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;
	unsigned int pciSubSystemId;
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

/* nvmlMemory_t (v1), of nvmlDeviceGetMemoryInfo; bytes. */
typedef struct nvmlMemory_st {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

/* nvmlUtilization_t: percent of the last sample period (1/6 s to 1 s). */
typedef struct nvmlUtilization_st {
	unsigned int gpu;
	unsigned int memory;
} nvmlUtilization_t;

/* nvmlProcessInfo_t of the _v2 and _v3 process lists (nvmlProcessInfo_v2_t
 * layout); usedGpuMemory is NVML_VALUE_NOT_AVAILABLE when unknown. */
typedef struct nvmlProcessInfo_st {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_t;

/* nvmlValueType_t and nvmlValue_t, of nvmlFieldValue_t. */
typedef enum nvmlValueType_enum {
	NVML_VALUE_TYPE_DOUBLE = 0,
	NVML_VALUE_TYPE_UNSIGNED_INT = 1,
	NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
	NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
	NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
	NVML_VALUE_TYPE_SIGNED_INT = 5,
	NVML_VALUE_TYPE_UNSIGNED_SHORT = 6
} nvmlValueType_t;

typedef union nvmlValue_st {
	double dVal;
	int siVal;
	unsigned int uiVal;
	unsigned long ulVal;
	unsigned long long ullVal;
	signed long long sllVal;
	unsigned short usVal;
} nvmlValue_t;

/* nvmlFieldValue_t, of nvmlDeviceGetFieldValues (40 bytes on LP64):
 * fieldId and scopeId in, the rest out; timestamp in microseconds since
 * 1970, when the driver read the value. */
typedef struct nvmlFieldValue_st {
	unsigned int fieldId;
	unsigned int scopeId;
	long long timestamp;
	long long latencyUsec;
	nvmlValueType_t valueType;
	nvmlReturn_t nvmlReturn;
	nvmlValue_t value;
} nvmlFieldValue_t;

/*
 * nvml.h's "NVLink throughput counters field values": data bytes sent and
 * received, counters in KiB; scopeId is the link, UINT_MAX the sum of all
 * links.
 */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139
/* nvml.h: "PCIe transmit bytes.  Value can be wrapped." (and receive);
 * counters in bytes, in newer drivers only. */
#define NVML_FI_DEV_PCIE_COUNT_TX_BYTES 197
#define NVML_FI_DEV_PCIE_COUNT_RX_BYTES 198

typedef nvmlReturn_t (*herd__nvml_procs_fn)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);

/* The entry points; those after the first group may be NULL. */
typedef struct herd__nvml_api {
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	const char *(*error_string)(nvmlReturn_t);
	nvmlReturn_t (*device_count)(unsigned int *);
	nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t *);
	nvmlReturn_t (*memory_info)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*cuda_cc)(nvmlDevice_t, int *, int *);
	/* NVLink entry points; NULL in drivers too old to have them. */
	nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned int, nvmlEnableState_t *);
	nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
	nvmlReturn_t (*nvlink_remote_type)(nvmlDevice_t, unsigned int,
					   nvmlIntNvLinkDeviceType_t *);
	nvmlReturn_t (*driver_version)(char *, unsigned int);
	/* herd health and telemetry */
	nvmlReturn_t (*ecc_mode)(nvmlDevice_t, nvmlEnableState_t *, nvmlEnableState_t *);
	nvmlReturn_t (*ecc_total)(nvmlDevice_t, int, int, unsigned long long *);
	nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *,
				      unsigned int *);
	nvmlReturn_t (*retired_pending)(nvmlDevice_t, nvmlEnableState_t *);
	nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*temperature_threshold)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned int *);         /* mW */
	nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned int *);         /* mW */
	nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);          /* MHz */
	nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*clock_events)(nvmlDevice_t, unsigned long long *);  /* R535 on */
	nvmlReturn_t (*throttle_reasons)(nvmlDevice_t, unsigned long long *);
	nvmlReturn_t (*pcie_gen)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*pcie_width)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*pcie_max_gen)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*pcie_max_width)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*bus_width)(nvmlDevice_t, unsigned int *);
	/* telemetry */
	nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t *);
	nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long *);        /* mJ */
	nvmlReturn_t (*pcie_throughput)(nvmlDevice_t, int, unsigned int *); /* KB/s */
	nvmlReturn_t (*field_values)(nvmlDevice_t, int, nvmlFieldValue_t *);
	herd__nvml_procs_fn compute_procs_v3, graphics_procs_v3;
	herd__nvml_procs_fn compute_procs_v2, graphics_procs_v2;
} herd__nvml_api;

/* An NVML session: the library, loaded and initialized. */
typedef struct herd__nvml {
	void *lib;
	herd__nvml_api api;
} herd__nvml;

/* The library herd loads. */
#define HERD_NVML_LIBRARY "libnvidia-ml.so.1"

/*
 * Loads and initializes NVML into *n; false, with why[cap] saying it as
 * discovery does ("NVIDIA driver not found: ...", "NVIDIA driver too old:
 * ... lacks ...", "NVML cannot start: ..."), when it cannot.  Raises
 * nothing.  Each session is closed with herd__nvml_close.
 */
bool herd__nvml_open(herd__nvml *n, char *why, size_t cap);

/* nvmlShutdown and dlclose.  Accepts a session that did not open. */
void herd__nvml_close(herd__nvml *n);

/* NVML's words for rc. */
const char *herd__nvml_err(const herd__nvml *n, nvmlReturn_t rc);
/* The clock event reasons of a mask that slow a GPU down for a fault (a
 * hardware slowdown, thermal slowdowns, the power brake), as words into
 * out ("hardware slowdown, hardware power brake"); "" when none. */
void herd__nvml_slowdowns(unsigned long long reasons, char *out, size_t cap);

/* A bus id from NVML, normalized ("0000:1b:00.0"): the 8-digit busId
 * field, else the legacy one; false when neither is one. */
bool herd__nvml_bus_id(const nvmlPciInfo_t *pci, char out[HERD_PCI_ID_LEN]);

/* An optional entry point's answer, or NVML_ERROR_FUNCTION_NOT_FOUND when
 * the driver lacks it. */
#define HERD__NVML_CALL(n, fn, ...) ((n)->api.fn != NULL ? (n)->api.fn(__VA_ARGS__) \
							  : NVML_ERROR_FUNCTION_NOT_FOUND)

/* A GPU as NVML knows it. */
typedef struct herd__nvml_gpu {
	unsigned int index;                 /* NVML's */
	nvmlDevice_t dev;
	char bus_id[HERD_PCI_ID_LEN];       /* normalized */
} herd__nvml_gpu;

/*
 * The GPUs NVML sees, in PCI bus order (as discovery orders them), into
 * *out (free) and *count.  A GPU without a handle or a bus id is left out,
 * with a sentence appended to why[cap].  HERD_EUNAVAIL with why[] set
 * (without raising) when NVML cannot count them or sees none; HERD_ENOMEM
 * raised.
 */
herd_status herd__nvml_gpus(herd__nvml *n, herd__nvml_gpu **out, size_t *count, char *why,
			    size_t cap);

#endif /* HERD_TOPO_NVML_H */
