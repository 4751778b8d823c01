package gpuportal

import "testing"

func TestPlacement(t *testing.T) {
	nodes := []FreeGPUs{{"a", []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"}}, {"b", []string{"b5", "b6", "b7"}}, {"c", []string{"c0", "c1"}}}
	if n, g, ok := PlaceOnOneNode(nodes, 2); !ok || n != "c" || len(g) != 2 {
		t.Errorf("2 GPUs → %s %v", n, g)
	}
	if n, _, ok := PlaceOnOneNode(nodes, 3); !ok || n != "b" {
		t.Errorf("3 GPUs → %s", n)
	}
	if n, _, ok := PlaceOnOneNode(nodes, 5); !ok || n != "a" {
		t.Errorf("5 GPUs → %s", n)
	}
	if _, _, ok := PlaceOnOneNode(nodes[1:], 4); ok {
		t.Error("4 GPUs placed on nodes with 3 and 2 free")
	}
	if g, ok := PackAcrossNodes(nodes, 8); !ok || g[0] != "a0" || g[7] != "a7" {
		t.Errorf("8 GPUs → %v (want all of node a)", g)
	}
	if g, ok := PackAcrossNodes(nodes, 10); !ok || len(g) != 10 || g[8] != "b5" {
		t.Errorf("10 GPUs → %v", g)
	}
	if _, ok := PackAcrossNodes(nodes, 14); ok {
		t.Error("14 GPUs out of 13")
	}
}
