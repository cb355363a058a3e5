# bash completion for herd (installed as share/bash-completion/completions/herd).
# Commands and their long options are read from herd's own help, so they
# stay what the program accepts.
_herd()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prog=${COMP_WORDS[0]} cmd words
	if (( COMP_CWORD == 1 )); then
		words=$("$prog" help 2>/dev/null | sed -n '/^Commands:/,/^[^ ]/s/^  \([a-z]\+\) .*/\1/p')
		COMPREPLY=($(compgen -W "$words" -- "$cur") $(compgen -f -X '!*.lua' -- "$cur"))
		return
	fi
	cmd=${COMP_WORDS[1]}
	# herd acct's times: sacct's relative forms and today's date
	if [[ $cmd == acct && ${COMP_WORDS[COMP_CWORD-1]} =~ ^(--since|--until|--starttime|--endtime|-S|-E)$ ]]; then
		COMPREPLY=($(compgen -W "now now-1hours now-1days now-7days $(date +%Y-%m-%d)" -- "$cur"))
		return
	fi
	# herd top's sort keys
	if [[ $cmd == top && ${COMP_WORDS[COMP_CWORD-1]} == --sort ]]; then
		COMPREPLY=($(compgen -W "index util memory power temp" -- "$cur"))
		return
	fi
	case $cmd in
	help)
		words=$("$prog" help 2>/dev/null | sed -n '/^Commands:/,/^[^ ]/s/^  \([a-z]\+\) .*/\1/p')
		COMPREPLY=($(compgen -W "$words env" -- "$cur"))
		;;
	ckpt)
		if (( COMP_CWORD == 2 )); then
			COMPREPLY=($(compgen -W "ls verify inspect diff export import" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		;;
	bench)
		if (( COMP_CWORD == 2 )); then
			words=$("$prog" bench --help 2>/dev/null | sed -n '/^  OP is/,/Options/p' |
				tr '\n' ' ' | sed 's/[(.].*//; s/OP is//; s/ or / /; s/,//g')
			COMPREPLY=($(compgen -W "$words" -- "$cur"))
			return
		fi
		;&
	*)
		if [[ $cur == -* ]]; then
			words=$("$prog" "$cmd" --help 2>/dev/null | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
			COMPREPLY=($(compgen -W "$words" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		;;
	esac
}
complete -F _herd herd
