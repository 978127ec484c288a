package state

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// PathPrefix is where [Handler] serves states: PathPrefix + "<namespace>/<name>".
const PathPrefix = "/state/"

// Address returns the http backend address of a resource's state under baseURL (e.g.
// "http://127.0.0.1:7070"): baseURL + "/state/<namespace>/<name>".
func Address(baseURL string, key Key) string {
	return strings.TrimSuffix(baseURL, "/") + PathPrefix + key.Namespace + "/" + key.Name
}

// HandlerOptions configures [NewHandler].
type HandlerOptions struct {
	// Password, when set, is required as the HTTP basic-auth password of every request (the
	// backend's `password`, or TF_HTTP_PASSWORD). The basic-auth username names the lock
	// holder either way.
	Password string
	// Tokens, when set, replaces Password: the basic-auth password must be a token issued for
	// the resource the request's path names ([Tokens]).
	Tokens *Tokens
	// Logger receives request failures (slog.DiscardHandler when nil).
	Logger *slog.Logger
}

// lockInfo is the Terraform CLI's lock info JSON (statemgr.LockInfo), the body of LOCK and
// UNLOCK requests and of 409/423 responses.
type lockInfo struct {
	ID        string    `json:"ID"`
	Operation string    `json:"Operation"`
	Info      string    `json:"Info"`
	Who       string    `json:"Who"`
	Version   string    `json:"Version"`
	Created   time.Time `json:"Created"`
	Path      string    `json:"Path"`
}

// maxLockBytes bounds a LOCK or UNLOCK body.
const maxLockBytes = 64 << 10

// Handler is a Terraform `http` state backend over a [Store], for the tofu and terraform
// engines. The applier binds it to loopback. Per resource, at PathPrefix+"<ns>/<name>":
//
//   - GET: 200 with the state body, or 204 when there is none yet;
//   - POST (with ?ID=<lock id> when the writer holds the lock): stores a body; 409 when it
//     would change the lineage of an existing state or move its serial backwards, 423 with
//     the lock info when another lock holds the state, 400 for a body that is not state v4;
//   - LOCK: 200 when taken, else 423 with the current lock info JSON;
//   - UNLOCK: 200 when released (or already unlocked), 409 with the lock info when another
//     lock holds it;
//   - DELETE: 405 (state is never deleted through the backend).
type Handler struct {
	store *Store
	opts  HandlerOptions
}

// NewHandler returns the http backend for store.
func NewHandler(store *Store, opts HandlerOptions) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{store: store, opts: opts}
}

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, pass, _ := r.BasicAuth()
	unauthorized := func() {
		w.Header().Set("WWW-Authenticate", `Basic realm="lava-state"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}
	if h.opts.Tokens == nil && h.opts.Password != "" && subtle.ConstantTimeCompare([]byte(pass), []byte(h.opts.Password)) != 1 {
		unauthorized()
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	key, err := ParseKey(rest)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if h.opts.Tokens != nil && !h.opts.Tokens.Valid(key, pass) {
		unauthorized()
		return
	}
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet:
		_, body, err := h.store.Body(ctx, key)
		if errors.Is(err, ErrNotFound) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if err != nil {
			h.fail(w, r, key, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	case http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, h.store.MaxStateBytes()+1))
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := h.store.Put(ctx, key, body, r.URL.Query().Get("ID")); err != nil {
			h.fail(w, r, key, err)
			return
		}
		w.WriteHeader(http.StatusOK)
	case "LOCK":
		li, ok := readLockInfo(w, r)
		if !ok {
			return
		}
		holder := user
		if holder == "" {
			holder = li.Who
		}
		_, err := h.store.Lock(ctx, key, Lock{ID: li.ID, Holder: holder, Operation: li.Operation,
			Who: li.Who, Info: li.Info, Version: li.Version, Path: li.Path})
		if err != nil {
			h.fail(w, r, key, err)
			return
		}
		w.WriteHeader(http.StatusOK)
	case "UNLOCK":
		li, ok := readLockInfo(w, r)
		if !ok {
			return
		}
		if err := h.store.Unlock(ctx, key, li.ID, false); err != nil {
			var le *LockedError
			if errors.As(err, &le) {
				writeLock(w, http.StatusConflict, le.Lock)
				return
			}
			h.fail(w, r, key, err)
			return
		}
		w.WriteHeader(http.StatusOK)
	default:
		w.Header().Set("Allow", "GET, POST, LOCK, UNLOCK")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func readLockInfo(w http.ResponseWriter, r *http.Request) (lockInfo, bool) {
	var li lockInfo
	b, err := io.ReadAll(io.LimitReader(r.Body, maxLockBytes))
	if err == nil {
		err = json.Unmarshal(b, &li)
	}
	if err == nil && li.ID == "" {
		err = errors.New("no lock ID")
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("bad lock info: %v", err), http.StatusBadRequest)
		return li, false
	}
	return li, true
}

func writeLock(w http.ResponseWriter, code int, l Lock) {
	b, _ := json.Marshal(lockInfo{ID: l.ID, Operation: l.Operation, Info: l.Info,
		Who: fmt.Sprintf("%s (%s)", l.Who, l.Holder), Version: l.Version, Created: l.Created, Path: l.Path})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// fail maps a store error to its status code.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, key Key, err error) {
	var le *LockedError
	switch {
	case errors.As(err, &le):
		writeLock(w, http.StatusLocked, le.Lock)
	case errors.Is(err, ErrConflict):
		http.Error(w, err.Error(), http.StatusConflict)
	case errors.Is(err, ErrInvalidState), errors.Is(err, ErrInvalidKey):
		http.Error(w, err.Error(), http.StatusBadRequest)
	default:
		h.opts.Logger.ErrorContext(r.Context(), "state backend request failed", "resource", key.String(),
			"method", r.Method, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}
