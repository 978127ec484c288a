{{/* Pieces the applier and drift share: the provider mirror, the work directory and the CLI engines. Argument: the service's values block. */}}
{{- define "lava.engine.env" -}}
- name: LAVA_PROVIDER_DIR
  value: {{ .providerDir | quote }}
- name: LAVA_WORK_DIR
  value: /var/lib/lava/work
{{- with .tofuBin }}
- name: LAVA_TOFU_BIN
  value: {{ . | quote }}
{{- end }}
- name: HOME
  value: /tmp
{{- end -}}
{{- define "lava.engine.mounts" -}}
- name: work
  mountPath: /var/lib/lava/work
{{- if .providerVolume }}
- name: providers
  mountPath: {{ .providerDir }}
  readOnly: true
{{- end }}
{{- end -}}
{{- define "lava.engine.volumes" -}}
- name: work
  emptyDir:
    sizeLimit: {{ .workDirSizeLimit }}
{{- with .providerVolume }}
- name: providers
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
