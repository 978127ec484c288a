// Package planpolicy is the platform admin's rules on plans: CEL expressions (the language of
// Kubernetes' ValidatingAdmissionPolicy, github.com/google/cel-go) evaluated on every plan the
// applier makes, remediation plans included, before anything is applied
// (docs/design/0037-plan-policies.md).
//
// A [Rule] is either a change rule, evaluated once per resource change with the variable
// `change` (address, type, mode, actions, and before/after with sensitive values removed), or a
// plan rule, evaluated once with `plan` (changes, summary); both see `object` (namespace,
// name, engine). A rule whose expression is true matches, and its verdict applies: deny or
// requireApproval. A plan's [Result] is the most severe verdict of the rules that matched
// (deny, then requireApproval, else allow), with each match's rule, message and addresses.
//
// Rules are compiled when the policy document is read ([Compile], called by the policy
// document's parser), so a rule that does not compile, or is not a bool, is refused there with
// its line and column, never at plan time. Evaluation is bounded: a cost limit per evaluation
// and per plan, a bound on the values a change shows, and [EvalTimeout] per plan; a rule that
// cannot decide on a change (an error, a bound reached) counts as matching it with its own
// verdict and says why, so a plan's author can make a deny rule fail only into denying.
package planpolicy
