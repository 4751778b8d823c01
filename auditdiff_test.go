package gpuportal

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestAuditChanges(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, old, new string
		want           []FieldChange
	}{
		{"a policy field", `{"global":{"spot_discount_percent":70,"min_duration_hours":4}}`, `{"global":{"spot_discount_percent":60,"min_duration_hours":4}}`,
			[]FieldChange{{"global.spot_discount_percent", "70", "60"}}},
		{"a list item's field", `{"tiers":[{"fee":0},{"fee":50}]}`, `{"tiers":[{"fee":0},{"fee":60}]}`,
			[]FieldChange{{"tiers[1].fee", "50", "60"}}},
		{"a list grown", `{"tiers":[1]}`, `{"tiers":[1,2]}`, []FieldChange{{"tiers", "[1]", "[1,2]"}}},
		{"added and removed", `{"a":1,"b":"x"}`, `{"b":"x","c":true}`, []FieldChange{{"a", "1", "—"}, {"c", "—", "true"}}},
		{"created", ``, `{"id":"jax","name":"JAX"}`, []FieldChange{{"id", "—", `"jax"`}, {"name", "—", `"JAX"`}}},
		{"a plain value", `900`, `1000`, []FieldChange{{"", "900", "1000"}}},
		{"an object added", `{"models":{}}`, `{"models":{"a100":{"min":6}}}`, []FieldChange{{"models.a100.min", "—", "6"}}},
		{"nothing changed", `{"a":[1,{"b":2}]}`, `{"a":[1,{"b":2}]}`, nil},
		{"text kept as written", `{"note":"a<b"}`, `{"note":"a>b"}`, []FieldChange{{"note", `"a<b"`, `"a>b"`}}},
	} {
		e := AuditEntry{OldValue: json.RawMessage(tt.old), NewValue: json.RawMessage(tt.new)}
		if got := e.Changes(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
