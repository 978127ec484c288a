package up

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lava-operator/lava/api/v1alpha1"
	"github.com/lava-operator/lava/internal/manifest"
)

// Snapshot is what the display shows: the objects and the manifest files that failed to read.
type Snapshot struct {
	// Objects are the LavaArchitectures, sorted by namespace/name.
	Objects []v1alpha1.LavaArchitecture
	// FileErrors are the manifest files that failed to read at the last scan.
	FileErrors []*manifest.FileError
	// Loaded is true once the source read its inputs completely at least once (every
	// manifest reconciled, or the cluster listed).
	Loaded bool
}

// Display renders snapshots to a writer: on a terminal a table and a progress line redrawn
// in place; otherwise one line per phase change (and the table on [Display.Final]).
type Display struct {
	w   io.Writer
	tty bool
	now func() time.Time

	mu    sync.Mutex
	lines int               // lines of the last frame drawn (tty)
	seen  map[string]string // key -> the line last printed for it, without its time (non-tty)
	spin  int
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// NewDisplay returns a display on w; tty selects in-place redraws.
func NewDisplay(w io.Writer, tty bool, now func() time.Time) *Display {
	if now == nil {
		now = time.Now
	}
	return &Display{w: w, tty: tty, now: now, seen: map[string]string{}}
}

// Println prints a line above the live frame.
func (d *Display) Println(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clearLocked()
	fmt.Fprintln(d.w, s)
}

// Update draws snap: a new frame on a terminal, a line per changed resource otherwise.
func (d *Display) Update(snap Snapshot) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tty {
		d.spin++
		d.clearLocked()
		frame := fitWidth(Table(snap, d.now())+progressLine(snap.Objects, d.now(), d.spin), termWidth(d.w))
		fmt.Fprint(d.w, frame)
		d.lines = strings.Count(frame, "\n")
		return
	}
	for _, o := range snap.Objects {
		key := o.Namespace + "/" + o.Name
		reason, msg := readyReason(o)
		// A line is printed when what it shows changed: a reason change within one phase
		// (Pending while the finalizer is added, then while it waits for synth) prints nothing.
		line := fmt.Sprintf("%-28s gen %d  %-12s %s", key, o.Generation, phaseOf(o), resourcesOf(o))
		if phaseOf(o) == v1alpha1.PhaseFailed {
			line += "  " + reason + ": " + oneLine(msg, 160)
		} else if a := awaitingApproval(o); a != "" {
			line += "  " + oneLine(a, 160)
		}
		line = strings.TrimRight(line, " ")
		if d.seen[key] == line {
			continue
		}
		d.seen[key] = line
		fmt.Fprintln(d.w, d.now().Format("15:04:05")+" "+line)
	}
	// d.seen holds resources ("namespace/name") and file errors ("file:<path> <key>", the key
	// empty for an error of the whole file): a resource that left the snapshot was destroyed;
	// a file error that left it was fixed.
	gone := map[string]bool{}
	for k := range d.seen {
		gone[k] = true
	}
	for _, o := range snap.Objects {
		delete(gone, o.Namespace+"/"+o.Name)
	}
	for _, fe := range snap.FileErrors {
		delete(gone, fileKey+fe.File+" "+fe.Key)
	}
	for _, k := range slices.Sorted(maps.Keys(gone)) {
		delete(d.seen, k)
		if !strings.HasPrefix(k, fileKey) {
			fmt.Fprintf(d.w, "%s %-28s destroyed\n", d.now().Format("15:04:05"), k)
		}
	}
	for _, fe := range snap.FileErrors {
		k := fileKey + fe.File + " " + fe.Key
		if d.seen[k] != fe.Err.Error() {
			d.seen[k] = fe.Err.Error()
			fmt.Fprintf(d.w, "%s %s\n", d.now().Format("15:04:05"), oneLine(fe.Error(), 200))
		}
	}
}

// fileKey prefixes the d.seen key of a manifest file's error.
const fileKey = "file:"

// Final draws the final table (without a progress line).
func (d *Display) Final(snap Snapshot) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clearLocked()
	fmt.Fprint(d.w, Table(snap, d.now()))
	d.lines = 0
}

// clearLocked erases the last frame on a terminal.
func (d *Display) clearLocked() {
	if d.tty && d.lines > 0 {
		fmt.Fprintf(d.w, "\x1b[%dA\x1b[J", d.lines)
	}
	d.lines = 0
}

// Table renders the table of snap: RESOURCE, PHASE, ENGINE, RESOURCES, LAST CHANGE, MESSAGE,
// then one line per manifest file that failed to read.
func Table(snap Snapshot, now time.Time) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tPHASE\tENGINE\tRESOURCES\tLAST CHANGE\tMESSAGE")
	for _, o := range snap.Objects {
		reason, msg := readyReason(o)
		note := ""
		switch {
		case o.DeletionTimestamp != nil && phaseOf(o) != v1alpha1.PhaseFinalizing:
			note = "deletion requested"
		case phaseOf(o) == v1alpha1.PhaseFailed:
			note = reason + ": " + oneLine(msg, 100)
		case meta.IsStatusConditionTrue(o.Status.Conditions, v1alpha1.ConditionSuspended):
			note = "suspended"
		case awaitingApproval(o) != "":
			note = oneLine(awaitingApproval(o), 100)
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%s\n", o.Namespace, o.Name, phaseOf(o), engineOf(o), resourcesOf(o), lastChange(o, now), note)
	}
	_ = tw.Flush()
	lines := strings.SplitAfter(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(strings.TrimSuffix(l, "\n"), " ") + l[len(strings.TrimSuffix(l, "\n")):]
	}
	b.Reset()
	b.WriteString(strings.Join(lines, ""))
	for _, fe := range snap.FileErrors {
		fmt.Fprintf(&b, "! %s\n", oneLine(fe.Error(), 200))
	}
	return b.String()
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// progressLine is the line naming what an engine (or synth) is working on, "" when nothing
// is.
func progressLine(objs []v1alpha1.LavaArchitecture, now time.Time, spin int) string {
	var work []string
	for _, o := range objs {
		if w := activity(o); w != "" {
			work = append(work, fmt.Sprintf("%s/%s: %s (%s)", o.Namespace, o.Name, w, since(lastChangeTime(o), now)))
		}
	}
	if len(work) == 0 {
		return ""
	}
	line := work[0]
	if len(work) > 1 {
		line += fmt.Sprintf(" and %d more", len(work)-1)
	}
	return spinner[spin%len(spinner)] + " " + line + "\n"
}

// activity is what the pipeline is doing with o ("" when o is settled).
func activity(o v1alpha1.LavaArchitecture) string {
	eng := engineOf(o)
	switch phaseOf(o) {
	case v1alpha1.PhasePending:
		if meta.IsStatusConditionTrue(o.Status.Conditions, v1alpha1.ConditionSuspended) {
			return ""
		}
		return "synthesizing"
	case v1alpha1.PhaseSynthesized:
		return "planning with " + eng
	case v1alpha1.PhasePlanned:
		if meta.IsStatusConditionTrue(o.Status.Conditions, v1alpha1.ConditionAwaitingApproval) {
			return ""
		}
		return "applying (" + planText(o) + ") with " + eng
	case v1alpha1.PhaseReconverging:
		return "re-applying with " + eng
	case v1alpha1.PhaseFinalizing:
		return "destroying with " + eng
	}
	return ""
}

// Settled reports whether o reached a phase where nothing more happens without a change:
// Applied or Failed for its current generation (or Drifted, or a plan awaiting approval, or
// suspended), and not being deleted.
func Settled(o v1alpha1.LavaArchitecture) bool {
	if o.DeletionTimestamp != nil || o.Status.ObservedGeneration != o.Generation {
		return false
	}
	if meta.IsStatusConditionTrue(o.Status.Conditions, v1alpha1.ConditionSuspended) {
		return true
	}
	switch phaseOf(o) {
	case v1alpha1.PhaseApplied, v1alpha1.PhaseFailed, v1alpha1.PhaseDrifted:
		return true
	case v1alpha1.PhasePlanned:
		return meta.IsStatusConditionTrue(o.Status.Conditions, v1alpha1.ConditionAwaitingApproval)
	}
	return false
}

// phaseOf is o's phase for its current generation: Pending while the status is still the
// previous generation's (a spec change not yet observed; not a deletion, which the API server
// also counts as a generation), else status.phase.
func phaseOf(o v1alpha1.LavaArchitecture) v1alpha1.Phase {
	if o.Status.Phase == "" || o.DeletionTimestamp == nil && o.Status.ObservedGeneration < o.Generation {
		return v1alpha1.PhasePending
	}
	return o.Status.Phase
}

func engineOf(o v1alpha1.LavaArchitecture) string {
	if o.Spec.Engine == "" {
		return string(v1alpha1.EngineEmbedded)
	}
	return string(o.Spec.Engine)
}

func planText(o v1alpha1.LavaArchitecture) string {
	p := o.Status.Plan
	if p == nil {
		return ""
	}
	return fmt.Sprintf("+%d ~%d -%d", p.Add, p.Change, p.Destroy)
}

// resourcesOf is the rendered resource count, with the last plan's summary; a Pending row
// shows neither the count nor the summary of a previous generation's plan.
func resourcesOf(o v1alpha1.LavaArchitecture) string {
	if o.Status.Render == nil {
		return "-"
	}
	s := fmt.Sprint(o.Status.Render.ResourceCount)
	if phaseOf(o) == v1alpha1.PhasePending {
		return s
	}
	if p := planText(o); p != "" {
		s += " (" + p + ")"
	}
	return s
}

// awaitingApproval is the AwaitingApproval condition's message when it is True (a plan waits
// for spec.approvePlan to name it), else "".
func awaitingApproval(o v1alpha1.LavaArchitecture) string {
	if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionAwaitingApproval); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	return ""
}

// readyReason is the Ready condition's reason and message.
func readyReason(o v1alpha1.LavaArchitecture) (string, string) {
	if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Reason, c.Message
	}
	return "", ""
}

// lastChangeTime is the newest condition transition (or the creation time).
func lastChangeTime(o v1alpha1.LavaArchitecture) time.Time {
	t := o.CreationTimestamp.Time
	for _, c := range o.Status.Conditions {
		if c.LastTransitionTime.After(t) {
			t = c.LastTransitionTime.Time
		}
	}
	if o.Status.LastAppliedAt != nil && o.Status.LastAppliedAt.After(t) {
		t = o.Status.LastAppliedAt.Time
	}
	return t
}

func lastChange(o v1alpha1.LavaArchitecture, now time.Time) string {
	t := lastChangeTime(o)
	if t.IsZero() {
		return "-"
	}
	return since(t, now) + " ago"
}

func since(t, now time.Time) string {
	d := now.Sub(t).Truncate(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String()
}

// fitWidth cuts every line of frame to width-1 runes (width 0: unknown, no cut), so that no
// line wraps and a redraw moves the cursor up exactly one row per line.
func fitWidth(frame string, width int) string {
	if width <= 1 {
		return frame
	}
	lines := strings.SplitAfter(frame, "\n")
	for i, l := range lines {
		body := strings.TrimSuffix(l, "\n")
		if r := []rune(body); len(r) > width-1 {
			lines[i] = string(r[:width-2]) + "…" + l[len(body):]
		}
	}
	return strings.Join(lines, "")
}

// oneLine is s's first line, cut to at most n runes, with every control and format character
// (an escape sequence's ESC, a carriage return, a bidirectional override) written as its
// escape ("\x1b", "\u202e"): a message a provider or a manifest made never drives the
// terminal.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !unicode.In(r, unicode.Cc, unicode.Cf):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}
