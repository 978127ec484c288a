package functions

import (
	"fmt"
	"maps"
	"strings"
)

// Signature is how many arguments a function takes: Params fixed ones, then, when Variadic,
// any number (zero included) of further ones.
type Signature struct {
	// Params is the number of fixed parameters, each required.
	Params int
	// Variadic is true when further arguments may follow the fixed ones.
	Variadic bool
}

// Accepts reports whether a call with n arguments matches s.
func (s Signature) Accepts(n int) bool {
	return n == s.Params || (s.Variadic && n > s.Params)
}

// String is the signature as a count of arguments: "2", "at least 1".
func (s Signature) String() string {
	if s.Variadic {
		return fmt.Sprintf("at least %d", s.Params)
	}
	return fmt.Sprint(s.Params)
}

// CorePrefix is the namespace OpenTofu and Terraform also name every built-in function in
// (core::abs is abs); it may appear once.
const CorePrefix = "core::"

// ProviderPrefix starts a provider-defined function's name (provider::NAME::FUNCTION, and in
// OpenTofu provider::NAME::ALIAS::FUNCTION). Its signature is in the provider's schema, which
// synthesis does not have: any such call passes [Check].
const ProviderPrefix = "provider::"

// builtin is OpenTofu 1.12.6's `tofu metadata functions -json`, without the core:: copies:
// each function's fixed parameters and whether it has a variadic one.
var builtin = map[string]Signature{
	"abs":              {1, false},
	"abspath":          {1, false},
	"alltrue":          {1, false},
	"anytrue":          {1, false},
	"base64decode":     {1, false},
	"base64encode":     {1, false},
	"base64gunzip":     {1, false},
	"base64gzip":       {1, false},
	"base64sha256":     {1, false},
	"base64sha512":     {1, false},
	"basename":         {1, false},
	"bcrypt":           {1, true},
	"can":              {1, false},
	"ceil":             {1, false},
	"chomp":            {1, false},
	"chunklist":        {2, false},
	"cidrcontains":     {2, false},
	"cidrhost":         {2, false},
	"cidrnetmask":      {1, false},
	"cidrsubnet":       {3, false},
	"cidrsubnets":      {1, true},
	"coalesce":         {0, true},
	"coalescelist":     {0, true},
	"compact":          {1, false},
	"concat":           {0, true},
	"contains":         {2, false},
	"csvdecode":        {1, false},
	"dirname":          {1, false},
	"distinct":         {1, false},
	"element":          {2, false},
	"endswith":         {2, false},
	"ephemeralasnull":  {1, false},
	"file":             {1, false},
	"filebase64":       {1, false},
	"filebase64sha256": {1, false},
	"filebase64sha512": {1, false},
	"fileexists":       {1, false},
	"filemd5":          {1, false},
	"fileset":          {2, false},
	"filesha1":         {1, false},
	"filesha256":       {1, false},
	"filesha512":       {1, false},
	"flatten":          {1, false},
	"floor":            {1, false},
	"format":           {1, true},
	"formatdate":       {2, false},
	"formatlist":       {1, true},
	"indent":           {2, false},
	"index":            {2, false},
	"issensitive":      {1, false},
	"join":             {1, true},
	"jsondecode":       {1, false},
	"jsonencode":       {1, false},
	"keys":             {1, false},
	"length":           {1, false},
	"log":              {2, false},
	"lookup":           {2, true},
	"lower":            {1, false},
	"matchkeys":        {3, false},
	"max":              {0, true},
	"md5":              {1, false},
	"merge":            {0, true},
	"min":              {0, true},
	"nonsensitive":     {1, false},
	"one":              {1, false},
	"parseint":         {2, false},
	"pathexpand":       {1, false},
	"plantimestamp":    {0, false},
	"pow":              {2, false},
	"range":            {0, true},
	"regex":            {2, false},
	"regexall":         {2, false},
	"replace":          {3, false},
	"reverse":          {1, false},
	"rsadecrypt":       {2, false},
	"sensitive":        {1, false},
	"setintersection":  {1, true},
	"setproduct":       {0, true},
	"setsubtract":      {2, false},
	"setunion":         {1, true},
	"sha1":             {1, false},
	"sha256":           {1, false},
	"sha512":           {1, false},
	"signum":           {1, false},
	"slice":            {3, false},
	"sort":             {1, false},
	"split":            {2, false},
	"startswith":       {2, false},
	"strcontains":      {2, false},
	"strrev":           {1, false},
	"substr":           {3, false},
	"sum":              {1, false},
	"templatefile":     {2, false},
	"templatestring":   {2, false},
	"textdecodebase64": {2, false},
	"textencodebase64": {2, false},
	"timeadd":          {2, false},
	"timecmp":          {2, false},
	"timestamp":        {0, false},
	"title":            {1, false},
	"tobool":           {1, false},
	"tolist":           {1, false},
	"tomap":            {1, false},
	"tonumber":         {1, false},
	"toset":            {1, false},
	"tostring":         {1, false},
	"transpose":        {1, false},
	"trim":             {2, false},
	"trimprefix":       {2, false},
	"trimspace":        {1, false},
	"trimsuffix":       {2, false},
	"try":              {0, true},
	"upper":            {1, false},
	"urldecode":        {1, false},
	"urlencode":        {1, false},
	"uuid":             {0, false},
	"uuidv5":           {2, false},
	"values":           {1, false},
	"yamldecode":       {1, false},
	"yamlencode":       {1, false},
	"zipmap":           {2, false},
}

// Builtin returns a copy of the built-in functions' table, keyed by the plain name (abs, not
// core::abs); [Lookup] also answers for the core:: names.
func Builtin() map[string]Signature { return maps.Clone(builtin) }

// Lookup returns the signature of the built-in function name, plain or with one core:: prefix
// (core::abs); ok is false for any other name, a provider-defined function's included.
func Lookup(name string) (sig Signature, ok bool) {
	sig, ok = builtin[strings.TrimPrefix(name, CorePrefix)]
	return sig, ok
}

// IsProviderFunction reports whether name is a provider-defined function's
// (provider::NAME::FUNCTION or provider::NAME::ALIAS::FUNCTION).
func IsProviderFunction(name string) bool {
	return strings.HasPrefix(name, ProviderPrefix)
}

// Check returns what is wrong with a call of name with args arguments, in Terraform's words,
// or "" when nothing is. expand is true when the last argument is expanded into the arguments
// (f(a, list...)): the count is then known only at evaluation, and only a function without a
// variadic parameter given more fixed arguments than it has is refused. A provider-defined
// function always passes (its signature is in the provider's schema).
func Check(name string, args int, expand bool) string {
	if IsProviderFunction(name) {
		return ""
	}
	sig, ok := Lookup(name)
	if !ok {
		return fmt.Sprintf("call to unknown function %s", name)
	}
	if expand {
		if fixed := args - 1; !sig.Variadic && fixed > sig.Params {
			return fmt.Sprintf("too many arguments to function %s: it takes %s, and %d come before the expanded one", name, sig, fixed)
		}
		return ""
	}
	if !sig.Accepts(args) {
		return fmt.Sprintf("wrong number of arguments to function %s: it takes %s, got %d", name, sig, args)
	}
	return ""
}
