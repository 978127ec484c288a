package docs

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// securityDoc is the document of trust boundaries, rules and their attack tests.
const securityDoc = "docs/security.md"

// attack is one attack of the attack trial recorded in docs/security.md ("Attack trial"): what
// was tried and the tests that try it again and assert that it is refused.
type attack struct {
	id    string
	tried string
	tests []string
}

// attackTrial is the attack trial's list: every attack it reproduced, each refused by the tests
// named (they live beside the code they attack, on real parts, and run in make test-all).
var attackTrial = []attack{
	{"1a", "lava up -f: a file sorting first declares another file's namespace/name and takes over its object",
		[]string{"TestSource_duplicateNameAttack"}},
	{"1b", "lava up -f: a new file inherits the uid and state of an object removed from its own file",
		[]string{"TestSource_uidBelongsToItsFile"}},
	{"2a", "setproduct of three 1024-element ranges, a YAML alias bomb, indent(1e9): out of memory in the engine",
		[]string{"TestEvaluationLimits_attacks", "TestApplier_evaluationLimits"}},
	{"2b", "a message whose handling kills or wedges its consumer is delivered again for ever",
		[]string{"TestConsume_wedgedHandlerIsTerminatedOthersFlow"}},
	{"3", "bcrypt(\"x\", 31) runs uncancellable and fills the applier's handlers",
		[]string{"TestEvaluationLimits_attacks"}},
	{"4a", "a provider type the file policy does not model (testkit_legacy_file) writes anywhere",
		[]string{"TestEngine_fileAccessAttacks"}},
	{"4b", "an executable planted in the provider mirror runs for another tenant",
		[]string{"TestEngine_plantedProvider"}},
	{"4c", "an import id that is a file path reads lava up's NATS seed and attest's signing key",
		[]string{"TestEngine_fileAccessAttacks"}},
	{"5a", "anonymous 4 MiB RPC requests read and decoded before the token is checked",
		[]string{"TestGuard_refusesBeforeReadingTheBody", "TestGuard_anonymousFlood"}},
	{"5b", "20,000 idle connections exhaust the RPC server's file descriptors",
		[]string{"TestServe_idleConnectionFlood"}},
	{"6a", "lava up --kubeconfig binds a Secret the tenant cannot read and shows it in status",
		[]string{"TestUp_kubeconfigLockdown"}},
	{"6b", "a sourceRef to another namespace's GitRepository puts that tenant's key into the attacker's outputs",
		[]string{"TestUp_kubeconfigLockdown"}},
	{"6c", "dependsOn tells which objects exist in any namespace and their phase",
		[]string{"TestUp_kubeconfigLockdown", "TestWatcher"}},
	{"7", "an Applied object's state record deleted: the object wedges in Synthesized",
		[]string{"TestApplier_lostOrRegressedStateHeldForApproval"}},
	{"8a", "one /tmp/lava-demo file root shared by every namespace",
		[]string{"TestUp_namespaceFileRootAttacks"}},
	{"8b", "a 22 MB manifest file read without a limit and parsed again every second",
		[]string{"TestSource_manifestSizeAttack", "TestSource_readsOnlyChangedFiles"}},
	{"8c", "a short name equal to a long name's hashed status-file name removes the victim's file",
		[]string{"TestSource_statusFileNameAttack"}},
	{"8d", "an output over NATS' max payload leaves the object in Planned with no message",
		[]string{"TestApplier_outputsOverMaxPayload"}},
	{"9a", "yamldecode of 400,000 unclosed brackets runs for minutes, uncancellable, in the applier",
		[]string{"TestEvaluationLimits_attacks"}},
	{"9b", "jsondecode of 9,999 nested arrays takes 1.6 GB per call",
		[]string{"TestEvaluationLimits_attacks"}},
	{"9c", "a local user creates lava up's state directory first, with its own NATS seeds and RPC token",
		[]string{"TestRun_stateDirAttacks"}},
	{"10a", "a template nested 100,000 levels overflows hcl's parser stack in synth or the applier",
		[]string{"TestCheckPolicy_attacks", "TestNesting_attacks", "TestCheck_refusesDeepTrees"}},
	{"10b", "regexall, replace or regex with a pattern and input built at run time runs for minutes",
		[]string{"TestEvaluationLimits_attacks"}},
	{"11a", "a 200 KB source of integers in nested loops takes synth out of memory on every restart",
		[]string{"TestEval_valueAttacks"}},
	{"11b", "toset of a 100,000-element tuple: quadratic type unification in every applier handler",
		[]string{"TestEvaluationLimits_attacks", "TestEvaluationLimits_legitimate"}},
	{"11c", "a 4-million-digit string converted to a number: 30 s of CPU per conversion",
		[]string{"TestEvaluationLimits_attacks"}},
	{"11d", "a $ binding interpolated 120,000 times: 41 GB allocated in synth",
		[]string{"TestEval_valueAttacks"}},
	{"11e", "toset of numbers that differ past their 10th significant digit: one hash bucket, quadratic",
		[]string{"TestEvaluationLimits_attacks"}},
	{"12a", "a 4-million-digit string as a list index, in sum, jsondecode or yamldecode: a minute of CPU each",
		[]string{"TestEvaluationLimits_attacks"}},
	{"12b", "1e600000000 % 3 keeps a 2-billion-bit mantissa: out of memory",
		[]string{"TestEvaluationLimits_attacks"}},
	{"13a", "349,000 references to an undeclared name: 4 minutes in synth past the diagnostics' cap",
		[]string{"TestEval_interpolationAttacks"}},
	{"13b", "references expanding to \"\" in 10,000 loop passes: 2 minutes and 9.8 GB",
		[]string{"TestEval_interpolationAttacks"}},
	{"13c", "100,000 template sequences and 200,000 references in one string: quadratic check",
		[]string{"TestSynthesize_manySequencesAndReferences"}},
	{"14a", "a Secret of 30,000 keys bound for one key: every value redacted, quadratic, 81.7 s per synthesis",
		[]string{"TestSynth_boundSecretKeysAttack", "TestRedactor_manySecretsAttack", "TestSet_manyPatternsAttack"}},
	{"14b", "10,000 Secret keys through a closed gate: one error each, each redacted of every value, 40.7 s and 4.6 GB",
		[]string{"TestSynthesize_manySecretKeysAttack"}},
	{"14c", "2,000 locals chained in reverse order to a Secret input: the sensitivity fixpoint takes 80 s",
		[]string{"TestSensitiveOutputs_chainAttack"}},
	{"14d", "9,000 inputs a closed gate does not declare: a Synthesized over max_payload, redelivered, never Failed",
		[]string{"TestCheckArchitecture_manyInputsAttack", "TestSynth_synthesizedOverMaxPayload"}},
	{"14e", "a conditional over a 30,000-element tuple of two types: quadratic type unification, 14 GB",
		[]string{"TestEvaluationLimits_attacks", "TestEvaluationLimits_legitimate"}},
	{"14f", "unknown locals referring twice to the previous one, and == over long lists: 2^depth evaluations",
		[]string{"TestEvaluationLimits_attacks", "TestEvaluationLimits_unknownLocalsEvaluatedOnce"}},
	{"15a", "a string of 4 million digits for a number attribute of the provider schema: 33 GB per plan",
		[]string{"TestEngine_schemaConversionLimits"}},
	{"15b", "a 3-million-digit number applied into the state, parsed by every later plan",
		[]string{"TestEvaluationLimits_attacks"}},
	{"15c", "coalesce and setproduct over 60,001 values of two types: pairwise unification, out of memory",
		[]string{"TestEvaluationLimits_attacks"}},
	{"15d", "99,225 undeclared references: one error each, 18.5 MB printed",
		[]string{"TestSynthesize_manyBadReferences"}},
	{"15e", "count = 1e9 with no maxResources: a key per instance, out of memory",
		[]string{"TestEvaluationLimits_count"}},
	{"15f", "a 2 MB sensitive value redacted from a 4 MB error that repeats its start: 172 s",
		[]string{"TestSet_longPatternAttack"}},
	{"16a", "83,000 undeclared references in one string: each error clipped the string again, 114 s",
		[]string{"TestSynthesize_manyBadReferencesInOneStringAttack"}},
	{"16b", "20,000 distinct denied functions in one string: no cap, each violation clipped the string",
		[]string{"TestCheckPolicy_manyDeniedFunctionsAttack"}},
	{"16c", "Secret bindings of control bytes: about 400 bytes of redactor memory per byte of value",
		[]string{"TestSynth_secretBytesAttack"}},
	{"16d", "240 nested loops over a 256-field row: 61,000 loop variables scanned per reference",
		[]string{"TestEval_interpolationAttacks"}},
	{"16e", "a message cut before it was redacted: a straddling secret kept a fragment",
		[]string{"TestRedactThenCut_straddlingSecret"}},
	{"16f", "2.7 million template sequences in one document: 33 s of CPU per plan and apply",
		[]string{"TestSynthesize_manySequencesAttack", "TestEvaluationLimits_sequences"}},
	{"17a", "optional(any, [for ...]) in a variable's type: evaluated outside every limit, 3 GB from 1 KB",
		[]string{"TestEvaluationLimits_typeDefaults", "TestCheckPolicy_typeDefaultAttack"}},
	{"17b", "a refused cross-namespace dependsOn held another tenant's deletion and was named in its status",
		[]string{"TestWatcher"}},
	{"18a", "a variable default of 1,000 alike numbers or 24,000 mixed values: converted outside the budget",
		[]string{"TestEvaluationLimits_readTimeConversions"}},
	{"18b", "nested for expressions in replace_triggered_by: 27 million elements built on every plan",
		[]string{"TestEvaluationLimits_readTimeConversions"}},
	{"19a", "optional() defaults of object lists nested 14 levels: 3^14 objects while the configuration is read",
		[]string{"TestEvaluationLimits_readTimeConversions", "TestTypeExpressionProblem"}},
	{"20a", "a 53 MB state written whole before each of 150 creates: 3 GB to JetStream from a 3 KB manifest",
		[]string{"TestRunner_largeStateSavesPaced"}},
	{"21a", "200 check messages of one 15 MB local: copied uncharged into the log, warnings and check_results, out of memory",
		[]string{"TestChecks_messagesBounded"}},
	{"21b", "one 15 MB local as the input of 60 instances: each use free, 60 copies in the plan, out of memory",
		[]string{"TestEvaluationLimits_referenceFanOut"}},
	{"21c", "a check message showing a computed copy of a sensitive value: logged and stored unredacted",
		[]string{"TestChecks_messagesBounded"}},
	{"22a", "a tofu-written state of 1.6-million-digit numbers read by the embedded engine: 15 s of CPU per plan and scan",
		[]string{"TestEngine_stateNumbersBounded"}},
	{"22b", "a stored file read back by 160 data sources, or imported 300 times: provider values uncharged, GBs of plan and state",
		[]string{"TestEvaluationLimits_providedValuesCharged", "TestEvent_valuesCut"}},
	{"23a", "a 15 MB sensitive() value: a redactor built over it at every failed plan, 7.8 GB, out of memory with two objects",
		[]string{"TestEngine_sensitiveValuesBounded"}},
	{"23b", "a 9 MB sensitive output in a tofu-engine state: a redactor over it for every later run, 4.6 GB each",
		[]string{"TestEngine_sensitiveStateOutputsBounded"}},
	{"23c", "six 60 MB values under approvePlan manual with the tofu engine: show -json read whole for the review, 5.7 GB",
		[]string{"TestEngine_shownPlanBounded"}},
	{"24a", "a replacement inside the state save pace, then kill -9: the replaced object's create forgotten and made twice",
		[]string{"TestRunner_pacedReplaceRecovered"}},
	{"24b", "a 180,000-byte control-character resource name under a gate: 900 KB receipts, attest out of memory on GetChain",
		[]string{"TestEval_diagnosticsBounded"}},
	{"24c", "a file name with an OSC title sequence in a provider's create error drives lava up's terminal",
		[]string{"TestOneLine_escapesControls"}},
	{"25a", "a deny plan rule made to fail on a sibling change or a sensitive() value becomes an approval the tenant gives",
		[]string{"TestEvaluate"}},
	{"25b", "deleting the object destroys what a deny plan rule protects",
		[]string{"TestApplier_planRules"}},
	{"25c", "a plan rule's exists over a tenant's 100,000-key map: 19 s an evaluation within the cost limit",
		[]string{"TestEvaluate_bounded"}},
	{"26a", "a Flux artifact of a few MiB expanding to gigabytes or millions of tar entries, read whole on every render",
		[]string{"TestArtifactCache_expansionBombAttack"}},
	{"26b", "setproduct of three 1024-element ranges under engine tofu: OpenTofu asks for hundreds of gigabytes at every plan and drift scan",
		[]string{"TestEngine_memoryBoundAttack"}},
	{"26c", "bcrypt(\"x\", 31) under engine tofu: evaluated at apply with no cost cap, each apply holds a handler for its 30-minute timeout",
		[]string{"TestEngine_cpuBoundAttack"}},
	{"26d", "a 500 KB map key that drifts at every scan, whole in each DriftScanned, drift anomaly and anomaly receipt",
		[]string{"TestEvent_attributesCut"}},
	{"26e", "spec.providerEnvFrom sets GOGC=off or GODEBUG for the providers and tofu",
		[]string{"TestReserved"}},
	{"26f", "one namespace's objects binding 32 Secrets each, rechecked at the floor: every watcher worker waits in that namespace's client rate limiter",
		[]string{"TestWatcher", "TestSecretBudget"}},
	{"26g", "a guarded deny plan rule passes over a value known only after apply or wrapped in sensitive(), and the value is applied",
		[]string{"TestApplier_planRulesUndecidableValues", "TestEvaluate"}},
	{"26h", "an expression known only after a first object exists kills tofu at its CPU limit before it saves its state: the object is forgotten and made again",
		[]string{"TestApplier_killedApplyHoldsNextPlan", "TestEngine_killedApplyNamesWhatItMade"}},
	{"27a", "150 aliased provider configurations, each used by one resource: 150 provider processes held by one plan in the shared applier",
		[]string{"TestEngine_providerConfigurationsBounded"}},
	{"27b", "lava up --provider-runner: a runner of one namespace writes beneath another namespace's directory of the file root",
		[]string{"TestRunner_otherNamespaceRootAttack"}},
	{"27c", "lava up --provider-runner: a program in one namespace's runner is served by another namespace's provider over its Unix socket",
		[]string{"TestRunner_providerSocketAttack"}},
	{"27d", "one namespace's distinct renders and speculative plans fill the shared artifact store and the NATS volume every tenant writes to",
		[]string{"TestSynth_artifactQuotaAttack", "TestPlanService_preview"}},
	{"27e", "one namespace's speculative plans hold every preview slot of the applier",
		[]string{"TestPlanService_preview"}},
	{"27f", "renders of a few bytes whose plans and states hold megabytes, and drift corrections with no render, fill the artifact store past a quota on renders",
		[]string{"TestApplier_artifactQuotaAttack"}},
	{"27g", "objects deleted with deletionPolicy Orphan under new names leave their state bodies in the artifact store for good",
		[]string{"TestApplier_orphanLimitAttack"}},
	{"27h", "an apply of slow creates beside a large state writes state snapshots at its pace for an hour from one charged plan",
		[]string{"TestRunner_snapshotsHeldBackByQuota"}},
	{"28a", "a provider configuration's path settings write the chart cache over Lava's NATS admin seed and read lava up's kubeconfig",
		[]string{"TestCheck_providerPaths", "TestRun_replacedKeysRefused"}},
	{"28b", "spec.providerEnvFrom points a provider at a kubeconfig, a helm path, a file or the pod's own ServiceAccount",
		[]string{"TestReserved"}},
	{"28c", "slow creates in four objects of one namespace hold every applier handler and drift scan slot for an hour",
		[]string{"TestConsume_namespaceShareAttack", "TestApplier_namespaceShareAttack", "TestService_namespaceShareAttack",
			"TestEngine_applyTimeoutStopsProvider", "TestEngine_planTimeoutHungRead"}},
	{"28d", "the same out-of-band change made twice is corrected once: the second correction's plan id equals the first's",
		[]string{"TestLoop_outOfBandDrift", "TestSpentApproval"}},
	{"28e", "a ResourceObserved over max_payload leaves its object Pending, and lava up then observes every object at every scan",
		[]string{"TestRun_observedOverMaxPayload", "TestSource_restartLooksAgainOnlyAtFailures"}},
	{"28f", "four plans of 16 aliased provider configurations each hold 64 provider processes in one applier",
		[]string{"TestEngine_processBudgetAcrossOperations", "TestEngine_processBudgetOperationOverBudget"}},
	{"29a", "lava up --provider-runner with engine tofu: a kubeconfig exec plugin runs as root outside the runners and copies the admin seed",
		[]string{"TestUp_providerRunner"}},
	{"29b", "spec edits of one object, or more slow objects of one namespace than the applier consumer's backlog, stop the pull for every namespace",
		[]string{"TestApplier_supersededGenerationAttack", "TestConsume_coalescedEditsAttack", "TestApplier_namespaceFloodAttack", "TestConsume_namespaceFloodAttack"}},
	{"30a", "one namespace's objects of 16 provider configurations and slow creates hold the whole provider process budget",
		[]string{"TestProcessBudget_namespaceShare", "TestEngine_processBudgetNamespaceShareAttack"}},
	{"30b", "rsadecrypt with a huge key runs uninterruptible for minutes per call, past every timeout",
		[]string{"TestEvaluationLimits_attacks"}},
	{"30c", "base64gunzip of a gzip bomb failing inside try is charged nothing",
		[]string{"TestEvaluationLimits_attacks"}},
	{"30d", "lava up --provider-runner's runners ran as nobody, whom other processes of the host share",
		[]string{"TestRunnerUIDInUse"}},
}

var (
	// testFunc is a top-level Go test function's declaration.
	testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	// testName is a test named in a document, in backticks: `TestX` or `TestX/subtest`.
	testName = regexp.MustCompile("`(Test[A-Za-z0-9_]+)(?:/[^`]*)?`")
)

// repositoryTests returns the names of every top-level test function in the repository's
// _test.go files (any build tag).
func repositoryTests(t *testing.T) map[string]bool {
	t.Helper()
	tests := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			tests[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) < 100 {
		t.Fatalf("found only %d test functions under %s: the walk is broken", len(tests), root)
	}
	return tests
}

// ruleRow is one row of a rule table in docs/security.md.
type ruleRow struct {
	line              int
	rule, attackTests string
}

// ruleRows returns the rows of every table whose header is "| rule | enforced by | attack test |".
func ruleRows(t *testing.T) []ruleRow {
	t.Helper()
	f, err := os.Open(filepath.Join(root, securityDoc))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []ruleRow
	inTable := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "| rule | enforced by | attack test |":
			inTable = true
		case !strings.HasPrefix(line, "|"):
			inTable = false
		case inTable && !strings.HasPrefix(line, "|---"):
			cells := splitRow(line)
			if len(cells) != 3 {
				t.Fatalf("%s:%d: a rule row has %d cells, want 3 (rule, enforced by, attack test)", securityDoc, n, len(cells))
			}
			rows = append(rows, ruleRow{line: n, rule: cells[0], attackTests: cells[2]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) < 50 {
		t.Fatalf("%s: only %d rule rows found: the table header changed?", securityDoc, len(rows))
	}
	return rows
}

// splitRow splits a Markdown table row into its trimmed cells; a `|` inside backticks or
// escaped as \| is part of its cell.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	code := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case c == '`':
			code = !code
			cur.WriteByte(c)
		case c == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// TestSecurity_everyRuleNamesAnAttackTestThatExists: every rule row of docs/security.md names at
// least one test in its attack-test column, and every test the document names is a test function
// of the repository (a renamed or deleted attack test fails here, not silently).
func TestSecurity_everyRuleNamesAnAttackTestThatExists(t *testing.T) {
	t.Parallel()
	tests := repositoryTests(t)
	for _, r := range ruleRows(t) {
		names := testName.FindAllStringSubmatch(r.attackTests, -1)
		if len(names) == 0 {
			t.Errorf("%s:%d: the rule %.80q names no attack test", securityDoc, r.line, r.rule)
		}
		for _, m := range names {
			if !tests[m[1]] {
				t.Errorf("%s:%d: %s is not a test function of the repository", securityDoc, r.line, m[1])
			}
		}
	}
	doc, err := os.ReadFile(filepath.Join(root, securityDoc))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range testName.FindAllSubmatch(doc, -1) {
		if !tests[string(m[1])] {
			t.Errorf("%s names %s, which is not a test function of the repository", securityDoc, m[1])
		}
	}
}

// TestSecurity_attackTrial: every attack of the attack trial has tests that refuse it, the
// tests exist, and docs/security.md names each of them in a rule row.
func TestSecurity_attackTrial(t *testing.T) {
	t.Parallel()
	tests := repositoryTests(t)
	var named []string
	for _, r := range ruleRows(t) {
		for _, m := range testName.FindAllStringSubmatch(r.attackTests, -1) {
			named = append(named, m[1])
		}
	}
	ids := map[string]bool{}
	for _, a := range attackTrial {
		t.Run(a.id, func(t *testing.T) {
			if ids[a.id] {
				t.Fatalf("attack %s listed twice", a.id)
			}
			ids[a.id] = true
			if len(a.tests) == 0 {
				t.Fatalf("attack %s (%s) has no test", a.id, a.tried)
			}
			for _, name := range a.tests {
				if !tests[name] {
					t.Errorf("attack %s (%s): %s is not a test function of the repository", a.id, a.tried, name)
				}
				if !slices.Contains(named, name) {
					t.Errorf("attack %s (%s): %s is named in no rule row of %s", a.id, a.tried, name, securityDoc)
				}
			}
		})
	}
}
