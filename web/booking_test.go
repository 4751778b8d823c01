package web

import (
	"testing"
	"time"

	"gpuportal"
)

func TestParseBookingJSON(t *testing.T) {
	t.Parallel()
	good := `{"model":"a100-80g","region":"cd-1","count":2,"start":"2026-12-01T10:00:00+08:00","end":"2026-12-01T14:00:00+08:00"}`
	req, err := parseBookingJSON([]byte(good), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC); !req.Start.Equal(want) || req.Count != 2 || req.Model != "a100-80g" {
		t.Fatalf("parsed %+v", req)
	}
	for _, tt := range []struct{ body, field string }{
		{`{"model":"a100-80g","region":"cd-1","count":"2","start":"2026-12-01T10:00:00Z","end":"2026-12-01T14:00:00Z"}`, "count"},
		{`{"model":"a100-80g","region":"cd-1","count":2.5,"start":"2026-12-01T10:00:00Z","end":"2026-12-01T14:00:00Z"}`, "count"},
		{`{"model":"a100-80g","region":"cd-1","count":1e30,"start":"2026-12-01T10:00:00Z","end":"2026-12-01T14:00:00Z"}`, "count"},
		{`{"model":"a100-80g","region":"cd-1","count":2,"start":"tomorrow","end":"2026-12-01T14:00:00Z"}`, "start"},
		{`{"model":"a100-80g","region":"cd-1","count":2,"start":"2026-12-01T10:00:00Z","end":12}`, "end"},
		{`{"model":"a100-80g","region":"cd-1","count":2,"start":"2026-12-01T10:00:00Z"}`, "end"},
		{`{"model":"","region":"cd-1","count":2,"start":"2026-12-01T10:00:00Z","end":"2026-12-01T14:00:00Z"}`, "model"},
		{`{"model":"a100-80g","count":2,"start":"2026-12-01T10:00:00Z","end":"2026-12-01T14:00:00Z"}`, "region"},
		{`{"model":"a100-80g","region":"cd-1","count":2,"start":"9999-12-01T10:00:00Z","end":"2026-12-01T14:00:00Z"}`, "start"},
		{`{"model":"a100-80g","region":"cd-1","count":2,"start":"2026-12-01T10:00:00Z","end":"2026-12-01T14:00:00Z","gpus":8}`, "gpus"},
		{`{"model":"a100-80g"`, ""},
		{`null`, ""},
		{`[1,2]`, ""},
		{``, ""},
	} {
		_, err := parseBookingJSON([]byte(tt.body), time.UTC)
		if gpuportal.ErrorCode(err) != gpuportal.EINVALID || gpuportal.ErrorField(err) != tt.field {
			t.Errorf("parse %s: %v (field %q); want invalid_input on %q", tt.body, err, gpuportal.ErrorField(err), tt.field)
		}
	}
}

// The parser never panics and only ever answers with invalid_input.
func FuzzParseBookingJSON(f *testing.F) {
	f.Add([]byte(`{"model":"a100-80g","region":"cd-1","count":2,"start":"2026-12-01T10:00:00+08:00","end":"2026-12-01T14:00:00+08:00"}`))
	f.Add([]byte(`{"model":"h100-80g","region":"cd-1","count":-1,"start":"2026-12-01T10:30:00Z","end":"2026-11-01T14:00:00Z"}`))
	f.Add([]byte(`{"count":1e309}`))
	f.Add([]byte(`{"start":"\u0000"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseBookingJSON(body, time.UTC)
		if err != nil {
			if code := gpuportal.ErrorCode(err); code != gpuportal.EINVALID {
				t.Fatalf("error code %q for %q: %v", code, body, err)
			}
			return
		}
		if req.Model == "" || req.Region == "" || req.Start.IsZero() || req.End.IsZero() {
			t.Fatalf("accepted an incomplete request %+v from %q", req, body)
		}
	})
}
