// Package hclnest bounds how deep an HCL native expression or template may nest before
// hcl/v2's hclsyntax parses or evaluates it.
//
// hclsyntax's parser, its walkers (hclsyntax.VisitAll, Variables) and its evaluation recurse
// once per level of the syntax tree, and a Go stack overflow is a fatal error that no
// recover catches: a string of a few hundred kilobytes ("${[[[[...]]]]}", a run of unary
// minus signs, a chain of conditionals) stops the whole process. [Check] lexes the source
// with hclsyntax's own scanner (which does not recurse) and refuses it when an upper bound on
// the tree's depth is over [Max]; [ParseTemplate] and [ParseExpression] check and then parse.
// Every place Lava parses tenant text with hclsyntax goes through them: the policy gate and
// the renderer at synthesis, and the embedded engine (which also checks every string of a
// Terraform JSON document before hcl/v2/json parses them itself).
//
// The package imports only hcl/v2.
package hclnest
