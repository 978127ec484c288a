// Package functions declares the Terraform language's built-in functions as Lava's engines
// know them: each name with its [Signature] (how many fixed parameters, and whether any number
// of further arguments follows). It is the one declaration of that table: synthesis checks
// every function call of a rendered document against it ([Check]), the embedded engine's
// implementations are tested against it (internal/engine/embedded), and so is the real
// OpenTofu's and Terraform's `metadata functions -json` (internal/engine/tofu).
//
// The table is OpenTofu 1.12's: every function Terraform 1.8 has is in it with the same
// signature, and OpenTofu has a few more (urldecode, templatestring, ...). A synthesis does not
// know which engine will plan the document, so a name any engine knows passes; the tenant
// policy refuses the ones Lava denies (the filesystem functions, nonsensitive, ...).
//
// The package imports only the standard library.
package functions
