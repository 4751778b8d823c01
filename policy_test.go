package gpuportal

import (
	"reflect"
	"testing"
)

func TestNoticeFor(t *testing.T) {
	p := DefaultPolicy()
	p.SpotNoticeSeconds = 120
	for _, c := range []struct{ asked, want int }{{0, 120}, {300, 300}, {10, 10}} {
		if got := p.NoticeFor(c.asked); got != c.want {
			t.Errorf("NoticeFor(%d) = %d, want %d", c.asked, got, c.want)
		}
	}
}

// A clone shares nothing mutable with its original: every pointer and
// list of an override, and the global policy's lists, are its own — a
// field added later that Clone forgets fails here.
func TestPoliciesCloneSharesNothing(t *testing.T) {
	p := DefaultPolicies()
	var o PolicyOverride
	ov := reflect.ValueOf(&o).Elem()
	for k := range ov.NumField() {
		f := ov.Field(k)
		if f.Kind() != reflect.Pointer {
			t.Fatalf("PolicyOverride.%s is not a pointer: this test needs to learn it", ov.Type().Field(k).Name)
		}
		f.Set(reflect.New(f.Type().Elem()))
		if f.Elem().Kind() == reflect.Slice {
			f.Elem().Set(reflect.MakeSlice(f.Elem().Type(), 1, 1))
		}
	}
	p.Models["a100-80g"] = o
	c := p.Clone()
	if !reflect.DeepEqual(c, p) {
		t.Fatalf("the clone differs from the original")
	}
	co := reflect.ValueOf(c.Models["a100-80g"])
	for k := range ov.NumField() {
		if co.Field(k).Pointer() == ov.Field(k).Pointer() {
			t.Errorf("PolicyOverride.%s is shared by the clone", ov.Type().Field(k).Name)
		}
		if e := ov.Field(k).Elem(); e.Kind() == reflect.Slice && co.Field(k).Elem().Pointer() == e.Pointer() {
			t.Errorf("PolicyOverride.%s's list is shared by the clone", ov.Type().Field(k).Name)
		}
	}
	gv, cv := reflect.ValueOf(p.Global), reflect.ValueOf(c.Global)
	for k := range gv.NumField() {
		if f := gv.Field(k); (f.Kind() == reflect.Slice || f.Kind() == reflect.Map || f.Kind() == reflect.Pointer) && !f.IsNil() && f.Pointer() == cv.Field(k).Pointer() {
			t.Errorf("Policy.%s is shared by the clone", gv.Type().Field(k).Name)
		}
	}
}
