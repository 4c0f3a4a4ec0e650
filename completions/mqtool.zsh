
#compdef mqtool

_mqtool_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _MQTOOL_COMPLETE=complete_zsh mqtool)
}

compdef _mqtool_completion mqtool

