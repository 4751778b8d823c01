package web

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"gpuportal"
)

// (issue 27) A launch or a job typed into the form is the request the
// JSON API decodes from the same fields: the two doors cannot drift.
func TestFormsReadAsTheJSONRequest(t *testing.T) {
	t.Parallel()
	launches := []struct {
		form url.Values
		json string
	}{
		{url.Values{"kind": {"spot"}, "model": {"a100-80g"}, "region": {"cd-1"}, "count": {"2"}, "command": {"python train.py"}},
			`{"kind":"spot","model":"a100-80g","region":"cd-1","count":2,"command":"python train.py"}`},
		{url.Values{"kind": {"spot"}, "model": {"h100-80g"}, "region": {"sh-1"}, "count": {" 1 "}, "command": {"x"}, "auto_restart": {"true"},
			"image": {"pytorch-2.5"}, "notice_seconds": {"300"}, "idle_stop_minutes": {"30"}, "volume": {"3", "4"}},
			`{"kind":"spot","model":"h100-80g","region":"sh-1","count":1,"command":"x","auto_restart":true,"image":"pytorch-2.5","notice_seconds":300,"idle_stop_minutes":30,"volumes":[{"id":3},{"id":4}]}`},
		{url.Values{"kind": {"reserved"}, "reservation_id": {"17"}, "count": {"8"}, "command": {"x"}},
			`{"kind":"reserved","reservation_id":17,"count":8,"command":"x"}`},
	}
	for _, tt := range launches {
		_, got, err := parseLaunchValues(tt.form)
		var want gpuportal.LaunchRequest
		if jerr := decodeStrict(strings.NewReader(tt.json), &want); err != nil || jerr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("launch form %v = %+v, %v; JSON %s = %+v, %v", tt.form, got, err, tt.json, want, jerr)
		}
	}
	jobs := []struct {
		form url.Values
		json string
	}{
		{url.Values{"name": {"sweep"}, "model": {"a100-80g"}, "region": {"cd-1"}, "gpus_per_task": {"1"}, "tasks": {"12"}, "command": {"x"},
			"max_parallel": {"4"}, "max_attempts": {"3"}, "kind": {"spot"}, "on_demand_workers": {""}},
			`{"name":"sweep","model":"a100-80g","region":"cd-1","gpus_per_task":1,"tasks":12,"command":"x","max_parallel":4,"max_attempts":3,"kind":"spot"}`},
		{url.Values{"model": {"a100-80g"}, "region": {"cd-1"}, "gpus_per_task": {"2"}, "tasks": {"3"}, "command": {"x"}, "max_parallel": {"3"},
			"max_attempts": {"1"}, "kind": {"hybrid"}, "on_demand_workers": {"1"}, "volume": {"9"}},
			`{"model":"a100-80g","region":"cd-1","gpus_per_task":2,"tasks":3,"command":"x","max_parallel":3,"max_attempts":1,"kind":"hybrid","on_demand_workers":1,"volumes":[{"id":9}]}`},
	}
	for _, tt := range jobs {
		_, got, err := parseJobValues(tt.form, "en")
		var want gpuportal.JobRequest
		if jerr := decodeStrict(strings.NewReader(tt.json), &want); err != nil || jerr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("job form %v = %+v, %v; JSON %s = %+v, %v", tt.form, got, err, tt.json, want, jerr)
		}
	}
	// What is not a number is refused by the field's JSON name, as the
	// JSON API names it.
	for _, tt := range []struct {
		form  url.Values
		field string
	}{
		{url.Values{"count": {"two"}}, "count"},
		{url.Values{"count": {"1"}, "notice_seconds": {"soon"}}, "notice_seconds"},
		{url.Values{"count": {"1"}, "idle_stop_minutes": {"1.5"}}, "idle_stop_minutes"},
		{url.Values{"count": {"1"}, "reservation_id": {"#17"}}, "reservation_id"},
		{url.Values{"count": {"1"}, "volume": {"data"}}, "volumes"},
	} {
		_, _, err := parseLaunchValues(tt.form)
		var e *gpuportal.Error
		if !errors.As(err, &e) || e.Code != gpuportal.EINVALID || e.Field != tt.field {
			t.Errorf("launch form %v: %v; want invalid_input naming %q", tt.form, err, tt.field)
		}
	}
	if _, _, err := parseJobValues(url.Values{"gpus_per_task": {"1"}, "tasks": {"many"}, "max_parallel": {"1"}, "max_attempts": {"1"}}, "en"); gpuportal.ErrorField(err) != "tasks" {
		t.Errorf("job form with tasks=many: %v; want it naming tasks", err)
	}
}
