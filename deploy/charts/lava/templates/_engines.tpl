{{/* Pieces the applier and drift share: the provider mirror, the work directory and the CLI engines. Argument: the service's values block. */}}
{{- define "lava.engine.env" -}}
- name: LAVA_PROVIDER_DIR
  value: {{ .providerDir | quote }}
- name: LAVA_WORK_DIR
  value: /var/lib/lava/work
{{- with .providerInstall }}
{{- with .cacheDir }}
- name: LAVA_PROVIDER_CACHE_DIR
  value: {{ . | quote }}
{{- end }}
{{- with .networkMirror }}
- name: LAVA_PROVIDER_NETWORK_MIRROR
  value: {{ . | quote }}
{{- end }}
{{- if .caConfigMap }}
- name: LAVA_PROVIDER_CA_FILE
  value: /etc/lava/provider-ca/ca.crt
{{- end }}
{{- end }}
{{- with .tofuBin }}
- name: LAVA_TOFU_BIN
  value: {{ . | quote }}
{{- end }}
{{- with .maxProviderProcesses }}
- name: LAVA_MAX_PROVIDER_PROCESSES
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
{{- if and .providerInstall .providerInstall.cacheDir }}
- name: provider-cache
  mountPath: {{ .providerInstall.cacheDir }}
{{- end }}
{{- if and .providerInstall .providerInstall.caConfigMap }}
- name: provider-ca
  mountPath: /etc/lava/provider-ca
  readOnly: true
{{- end }}
{{- end -}}
{{/* lava.engine.fileMount: the fileVolume mount; argument: dict values (the service's block), readOnly. */}}
{{- define "lava.engine.fileMount" -}}
{{- with .values.fileVolume }}{{ if .source }}
- name: files
  mountPath: {{ .mountPath }}
  {{- if $.readOnly }}
  readOnly: true
  {{- end }}
{{- end }}{{ end }}
{{- end -}}
{{- define "lava.engine.volumes" -}}
- name: work
  emptyDir:
    sizeLimit: {{ .workDirSizeLimit }}
{{- with .providerVolume }}
- name: providers
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if and .providerInstall .providerInstall.cacheDir }}
- name: provider-cache
  emptyDir:
    sizeLimit: {{ .providerInstall.cacheSizeLimit }}
{{- end }}
{{- if and .providerInstall .providerInstall.caConfigMap }}
- name: provider-ca
  configMap:
    name: {{ .providerInstall.caConfigMap }}
    items: [{key: ca.crt, path: ca.crt}]
{{- end }}
{{- with .fileVolume }}{{ with .source }}
- name: files
  {{- toYaml . | nindent 2 }}
{{- end }}{{ end }}
{{- end -}}

{{/* The tenant policy's ConfigMap (synth.yaml), mounted read-only into synth, the applier and drift: synth checks every render against it, the engines hold provider file paths to its roots (docs/design/0022-file-access-from-schemas.md). Argument: the root context. */}}
{{- define "lava.policy.env" -}}
- name: LAVA_POLICY_FILE
  value: /etc/lava/policy/policy.yaml
{{- end -}}
{{- define "lava.policy.mount" -}}
- name: policy
  mountPath: /etc/lava/policy
  readOnly: true
{{- end -}}
{{- define "lava.policy.volume" -}}
- name: policy
  configMap:
    name: {{ include "lava.fullname" . }}-policy
{{- end -}}
