package gpuportal

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// FieldChange is one field an audited change changed, its values as JSON
// ("—" where the field was absent on that side).
type FieldChange struct {
	Field, Old, New string
}

// Changes lists what an audited change changed, field by field (dotted
// paths, list items by index: "global.cancellation_tiers[1].fee_percent"),
// so a reader sees "fee_percent 50 → 60" and not two whole documents.
// Fields equal on both sides are left out; a value that is no JSON object
// is one field named "".
func (e AuditEntry) Changes() []FieldChange {
	var old, next any
	_ = json.Unmarshal(e.OldValue, &old)
	_ = json.Unmarshal(e.NewValue, &next)
	var out []FieldChange
	diffJSON("", old, next, &out)
	return out
}

const absent = "—"

func diffJSON(path string, old, next any, out *[]FieldChange) {
	om, oIsMap := old.(map[string]any)
	nm, nIsMap := next.(map[string]any)
	if oIsMap && nIsMap || oIsMap && next == nil || nIsMap && old == nil {
		keys := map[string]bool{}
		for k := range om {
			keys[k] = true
		}
		for k := range nm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		for _, k := range sorted {
			o, oOK := om[k]
			n, nOK := nm[k]
			// A side without the field is nil: an object added or
			// removed is listed by its fields too.
			if !oOK {
				o = nil
			}
			if !nOK {
				n = nil
			}
			diffJSON(joinPath(path, k), o, n, out)
		}
		return
	}
	ol, oIsList := old.([]any)
	nl, nIsList := next.([]any)
	if oIsList && nIsList && len(ol) == len(nl) {
		for i := range ol {
			diffJSON(path+"["+strconv.Itoa(i)+"]", ol[i], nl[i], out)
		}
		return
	}
	if o, n := jsonText(old), jsonText(next); o != n {
		if old == nil {
			o = absent
		}
		if next == nil {
			n = absent
		}
		*out = append(*out, FieldChange{path, o, n})
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return string(bytes.TrimSpace(b.Bytes()))
}
