{{/* Names, labels and the pieces every service's Deployment shares. */}}

{{- define "lava.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lava.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* lava.component: "<fullname>-<service>"; the name of a service's Deployment, ServiceAccount, Service and RBAC. Argument: dict root, svc. */}}
{{- define "lava.component" -}}
{{- printf "%s-%s" (include "lava.fullname" .root) .svc | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lava.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "lava.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: lava
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* lava.componentLabels: the common labels plus the service's component label. Argument: dict root, svc. */}}
{{- define "lava.componentLabels" -}}
{{ include "lava.labels" .root }}
app.kubernetes.io/component: {{ .svc }}
{{- end -}}

{{/* lava.selectorLabels: the immutable selector of a service's pods. Argument: dict root, svc. */}}
{{- define "lava.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lava.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .svc }}
{{- end -}}

{{/* lava.natsCredsSecret: the Secret holding the NATS credentials file, or "" for none. */}}
{{- define "lava.natsCredsSecret" -}}
{{- if .Values.nats.creds -}}
{{- printf "%s-nats-creds" (include "lava.fullname" .) -}}
{{- else -}}
{{- .Values.nats.credsSecret -}}
{{- end -}}
{{- end -}}

{{/* lava.keySecret: the Secret name of a key block ({existingSecret, key, value}); fails when neither is set. Argument: dict root, svc, block, what, path. */}}
{{- define "lava.keySecret" -}}
{{- if .block.value -}}
{{- printf "%s-%s" (include "lava.fullname" .root) .what -}}
{{- else if .block.existingSecret -}}
{{- .block.existingSecret -}}
{{- else -}}
{{- fail (printf "%s: set %s.existingSecret (an existing Secret) or %s.value (64 hex digits); the chart never generates keys (docs/install.md)" .path .path .path) -}}
{{- end -}}
{{- end -}}

{{/*
lava.deployment renders a service's Deployment. Argument: dict
  root      the top-level context
  svc       the service name (watcher, synth, ...)
  values    the service's values block
  kube      true when the pod calls the Kubernetes API (mounts the ServiceAccount token)
  replicasEnv  LAVA_REPLICAS: the variable of the common --replicas flag (nats.streamReplicas)
  env       extra container env (YAML list text), may be ""
  ports     extra container ports (YAML list text), may be ""
  mounts    extra volumeMounts (YAML list text), may be ""
  volumes   extra volumes (YAML list text), may be ""
  annotations  extra pod annotations (YAML map text), may be ""
*/}}
{{- define "lava.deployment" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $ctx := dict "root" $root "svc" .svc -}}
{{- $creds := include "lava.natsCredsSecret" $root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "lava.component" $ctx }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "lava.componentLabels" $ctx | nindent 4 }}
spec:
  replicas: {{ $v.replicas }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "lava.selectorLabels" $ctx | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "lava.componentLabels" $ctx | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- if or $v.podAnnotations .annotations }}
      annotations:
        {{- with .annotations }}
        {{- . | nindent 8 }}
        {{- end }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "lava.component" $ctx }}
      automountServiceAccountToken: {{ .kube }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: 60
      containers:
        - name: {{ .svc }}
          image: {{ printf "%s:%s" $v.image.repository (default $root.Chart.AppVersion $v.image.tag) | quote }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          {{- with $v.extraArgs }}
          args:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          env:
            {{- with include "lava.natsEnv" $root }}
            {{- . | trim | nindent 12 }}
            {{- end }}
            - name: {{ .replicasEnv }}
              value: {{ $root.Values.nats.streamReplicas | quote }}
            - name: LAVA_LOG_FORMAT
              value: {{ $root.Values.log.format | quote }}
            - name: LAVA_LOG_LEVEL
              value: {{ $root.Values.log.level | quote }}
            {{- if .kube }}
            - name: LAVA_KUBE_API_QPS
              value: {{ $root.Values.kubeAPI.qps | quote }}
            - name: LAVA_KUBE_API_BURST
              value: {{ $root.Values.kubeAPI.burst | quote }}
            {{- end }}
            {{- if $v.concurrency }}
            - name: LAVA_CONCURRENCY
              value: {{ $v.concurrency | quote }}
            {{- end }}
            {{- if $v.maxConcurrencyPerNamespace }}
            - name: LAVA_MAX_CONCURRENCY_PER_NAMESPACE
              value: {{ $v.maxConcurrencyPerNamespace | quote }}
            {{- end }}
            {{- with .env }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $v.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: metrics
              containerPort: 9090
              protocol: TCP
            - name: health
              containerPort: 9091
              protocol: TCP
            {{- with .ports }}
            {{- . | nindent 12 }}
            {{- end }}
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            {{- toYaml $root.Values.probes.liveness | nindent 12 }}
          readinessProbe:
            httpGet:
              path: /readyz
              port: health
            {{- toYaml $root.Values.probes.readiness | nindent 12 }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            {{- $sc := deepCopy $root.Values.securityContext }}
            {{- if .engine }}
            {{- /* The engines run tenants' providers: never writable image, never root (docs/security.md, "Engines"). */}}
            {{- $sc = merge (dict "readOnlyRootFilesystem" true "runAsNonRoot" true) $sc }}
            {{- end }}
            {{- toYaml $sc | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- with include "lava.natsMounts" $root }}
            {{- . | trim | nindent 12 }}
            {{- end }}
            {{- with .mounts }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 256Mi
        {{- with include "lava.natsVolumes" (dict "root" $root "nkeySecret" (printf "%s%s" $root.Values.nats.nkeys.secretPrefix .svc)) }}
        {{- . | trim | nindent 8 }}
        {{- end }}
        {{- with .volumes }}
        {{- . | nindent 8 }}
        {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/* lava.natsEnv: the container env of a NATS client (URL, credentials, TLS, nkey), for every service and the bootstrap Job. Argument: the top-level context. */}}
{{- define "lava.natsEnv" -}}
{{- if $.Values.nats.urlSecret.name }}
- name: LAVA_NATS_URL
  valueFrom:
    secretKeyRef:
      name: {{ $.Values.nats.urlSecret.name }}
      key: {{ $.Values.nats.urlSecret.key }}
{{- else }}
- name: LAVA_NATS_URL
  value: {{ $.Values.nats.url | quote }}
{{- end }}
{{- if include "lava.natsCredsSecret" $ }}
- name: LAVA_NATS_CREDS
  value: /etc/lava/nats/creds
{{- end }}
{{- if $.Values.nats.tls.secret }}
- name: SSL_CERT_DIR
  value: /etc/lava/nats-tls
- name: LAVA_NATS_CA
  value: /etc/lava/nats-tls/ca.crt
{{- end }}
{{- if $.Values.nats.tls.clientSecret }}
- name: LAVA_NATS_CERT
  value: /etc/lava/nats-client/tls.crt
- name: LAVA_NATS_KEY
  value: /etc/lava/nats-client/tls.key
{{- end }}
{{- if $.Values.nats.nkeys.enabled }}
- name: LAVA_NATS_NKEY
  value: /etc/lava/nats-nkey/nkey
{{- end }}
{{- end -}}

{{/* lava.natsMounts: the volumeMounts matching lava.natsEnv. Argument: the top-level context. */}}
{{- define "lava.natsMounts" -}}
{{- if (include "lava.natsCredsSecret" $) }}
- name: nats-creds
  mountPath: /etc/lava/nats
  readOnly: true
{{- end }}
{{- if $.Values.nats.tls.secret }}
- name: nats-tls
  mountPath: /etc/lava/nats-tls
  readOnly: true
{{- end }}
{{- if $.Values.nats.tls.clientSecret }}
- name: nats-client
  mountPath: /etc/lava/nats-client
  readOnly: true
{{- end }}
{{- if $.Values.nats.nkeys.enabled }}
- name: nats-nkey
  mountPath: /etc/lava/nats-nkey
  readOnly: true
{{- end }}
{{- end -}}

{{/* lava.natsVolumes: the volumes matching lava.natsMounts. Argument: dict root, nkeySecret (the Secret of this pod's nkey seed). */}}
{{- define "lava.natsVolumes" -}}
{{- $root := .root -}}
{{- $creds := include "lava.natsCredsSecret" $root -}}
{{- if $creds }}
- name: nats-creds
  secret:
    secretName: {{ $creds }}
    defaultMode: 0440
    items:
      - key: {{ $root.Values.nats.credsSecretKey }}
        path: creds
{{- end }}
{{- if $root.Values.nats.tls.secret }}
- name: nats-tls
  secret:
    secretName: {{ $root.Values.nats.tls.secret }}
    defaultMode: 0444
    items:
      - key: {{ $root.Values.nats.tls.caKey }}
        path: ca.crt
{{- end }}
{{- if $root.Values.nats.tls.clientSecret }}
- name: nats-client
  secret:
    secretName: {{ $root.Values.nats.tls.clientSecret }}
    defaultMode: 0440
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- if $root.Values.nats.nkeys.enabled }}
- name: nats-nkey
  secret:
    secretName: {{ .nkeySecret }}
    defaultMode: 0440
    items:
      - key: {{ $root.Values.nats.nkeys.key }}
        path: nkey
{{- end }}
{{- end -}}

{{/* lava.serviceAccount renders a service's ServiceAccount. Argument: dict root, svc, values, kube. */}}
{{- define "lava.serviceAccount" -}}
{{- $ctx := dict "root" .root "svc" .svc -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "lava.component" $ctx }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "lava.componentLabels" $ctx | nindent 4 }}
  {{- with .values.serviceAccountAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: {{ .kube }}
{{- end -}}

{{/* lava.service renders a service's Service: metrics (9090) and, with connect, the connect port. Argument: dict root, svc, connect (the service values block with type and port, or nil). */}}
{{- define "lava.service" -}}
{{- $ctx := dict "root" .root "svc" .svc -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "lava.component" $ctx }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "lava.componentLabels" $ctx | nindent 4 }}
    lava.pleme.io/metrics: "true"
spec:
  type: {{ if .connect }}{{ .connect.type }}{{ else }}ClusterIP{{ end }}
  selector:
    {{- include "lava.selectorLabels" $ctx | nindent 4 }}
  ports:
    - name: metrics
      port: 9090
      targetPort: metrics
      protocol: TCP
    {{- if .connect }}
    - name: connect
      port: {{ .connect.port }}
      targetPort: connect
      protocol: TCP
      appProtocol: http
    {{- end }}
{{- end -}}

{{/*
lava.namespaces is the comma-separated list of watched namespaces: watchNamespaces, else the
release's namespace unless clusterWide is true (then "": every namespace). Argument: the root
context.
*/}}
{{- define "lava.namespaces" -}}
{{- if .Values.watchNamespaces }}{{ join "," .Values.watchNamespaces }}{{ else if not .Values.clusterWide }}{{ .Release.Namespace }}{{ end }}
{{- end -}}

{{/*
lava.rbac renders a service's access to the namespaces that hold LavaArchitectures: a Role and
RoleBinding in each watched namespace (lava.namespaces), or one ClusterRole and
ClusterRoleBinding for a cluster-wide install (clusterWide: true, no watchNamespaces).
Argument: dict root, svc, rules (YAML list text).
*/}}
{{- define "lava.rbac" -}}
{{- $root := .root -}}
{{- $ctx := dict "root" $root "svc" .svc -}}
{{- $name := include "lava.component" $ctx -}}
{{- $nss := include "lava.namespaces" $root -}}
{{- if not $nss }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ $name }}
  labels:
    {{- include "lava.componentLabels" $ctx | nindent 4 }}
rules:
  {{- .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "lava.componentLabels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ $root.Release.Namespace }}
{{- else }}
{{- range $ns := splitList "," $nss }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- include "lava.componentLabels" $ctx | nindent 4 }}
rules:
  {{- $.rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ $ns }}
  labels:
    {{- include "lava.componentLabels" $ctx | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
  - kind: ServiceAccount
    name: {{ $name }}
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
lava.tenancy.env: the impersonation settings of synth and the applier (values tenancy.*;
docs/security.md, "Kubernetes RBAC"). Argument: the root context.
*/}}
{{- define "lava.tenancy.env" -}}
- name: LAVA_IMPERSONATE
  value: {{ .Values.tenancy.impersonate | quote }}
- name: LAVA_DEFAULT_SERVICE_ACCOUNT
  value: {{ .Values.tenancy.defaultServiceAccount | quote }}
- name: LAVA_ALLOW_OWN_IDENTITY
  value: {{ .Values.tenancy.allowOwnIdentity | quote }}
{{- end -}}

{{/*
lava.providerCredentials.env: the provider credential flags of the applier and drift (values providerCredentials.*).
*/}}
{{- define "lava.providerCredentials.env" -}}
- name: LAVA_PROVIDER_TOKEN_AUDIENCE
  value: {{ .Values.providerCredentials.tokenAudience | quote }}
- name: LAVA_PROVIDER_TOKEN_EXPIRY
  value: {{ .Values.providerCredentials.tokenExpiry | quote }}
- name: LAVA_GCP_WORKLOAD_IDENTITY_PROVIDER
  value: {{ .Values.providerCredentials.gcpWorkloadIdentityProvider | quote }}
- name: LAVA_AZURE_TENANT_ID
  value: {{ .Values.providerCredentials.azureTenantID | quote }}
{{- end -}}

{{/*
lava.providerCredentials.rules: the RBAC rules of the applier and drift to build each object's
provider credentials, when providerCredentials.tokenAudience is set: the ServiceAccount's
workload-identity annotations and a token for it (docs/security.md, "Engines").
Argument: the root context.
*/}}
{{- define "lava.providerCredentials.rules" -}}
{{- if .Values.providerCredentials.tokenAudience -}}
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get]
- apiGroups: [""]
  resources: [serviceaccounts/token]
  verbs: [create]
{{- end }}
{{- end -}}

{{/*
lava.tenancy.rules: the RBAC rule to impersonate ServiceAccounts, when tenancy.impersonate is on.
Argument: the root context.
*/}}
{{- define "lava.tenancy.rules" -}}
{{- if .Values.tenancy.impersonate -}}
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [impersonate]
{{- end }}
{{- end -}}

{{/*
lava.tenancy.ownAccess: whether the service still needs its own access to ConfigMaps and
Secrets (impersonation off, or objects without a ServiceAccount allowed to use Lava's identity).
*/}}
{{- define "lava.tenancy.ownAccess" -}}
{{- if or (not .Values.tenancy.impersonate) .Values.tenancy.allowOwnIdentity }}true{{ end }}
{{- end -}}
