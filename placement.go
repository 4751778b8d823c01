package gpuportal

import "sort"

// FreeGPUs is one node's GPUs available for a placement.
type FreeGPUs struct {
	Node string
	GPUs []string // in index order
}

// PlaceOnOneNode picks count GPUs on a single node, packing: the node with
// the fewest free GPUs that still fits, so large holes stay for large
// instances. ok is false when no node fits.
func PlaceOnOneNode(nodes []FreeGPUs, count int) (node string, gpus []string, ok bool) {
	best := -1
	for i, n := range nodes {
		if len(n.GPUs) >= count && (best < 0 || len(n.GPUs) < len(nodes[best].GPUs) || (len(n.GPUs) == len(nodes[best].GPUs) && n.Node < nodes[best].Node)) {
			best = i
		}
	}
	if best < 0 {
		return "", nil, false
	}
	return nodes[best].Node, append([]string(nil), nodes[best].GPUs[:count]...), true
}

// PackAcrossNodes picks count GPUs over as few nodes as possible: one node
// when any can hold them all, else the fullest nodes first.
func PackAcrossNodes(nodes []FreeGPUs, count int) ([]string, bool) {
	if node, gpus, ok := PlaceOnOneNode(nodes, count); ok && node != "" {
		return gpus, true
	}
	sorted := append([]FreeGPUs(nil), nodes...)
	sort.SliceStable(sorted, func(i, j int) bool { return len(sorted[i].GPUs) > len(sorted[j].GPUs) })
	var out []string
	for _, n := range sorted {
		for _, g := range n.GPUs {
			if len(out) == count {
				return out, true
			}
			out = append(out, g)
		}
	}
	return out, len(out) == count
}
