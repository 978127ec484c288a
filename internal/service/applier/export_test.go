package applier

// SetPreviewHook makes every preview call f with its namespace and name once it holds its
// slots (before it renders), until the returned function restores none. Set it before the
// previews start and restore it after they end.
func SetPreviewHook(f func(namespace, name string)) (restore func()) {
	previewHook = f
	return func() { previewHook = nil }
}
