package runner

// Spawns is how many runner processes the host has started.
func (h *Host) Spawns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.spawns
}

// Root is the host's directory.
func (h *Host) Root() string { return h.root }
