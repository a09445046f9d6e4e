package statuspage

// Snapshots is how many snapshots p keeps.
func Snapshots(p *Page) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.snapshots)
}
