package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"gpuportal"
	"gpuportal/store/storetest"
)

// The contract test (issue 27): the OpenAPI document is read as a
// script's author reads it, and the API is held to it. For every query
// parameter of every GET route, values the document allows are answered
// (and change the answer as documented), values it does not allow are 400
// naming the parameter. For every JSON request body, bodies generated
// from the schema to break one rule each are refused with a 4xx, and
// bodies generated within it are never 400. The generator is small and
// seeded (CONTRACT_SEED picks another run; a failure prints its seed).
//
// Left out, each for a reason: the agent's routes (a node's protocol,
// tested against real agents in e2e), the payment webhook (signed by the
// provider; web/money_test.go), the admin clock (moves time for every
// other case) and a volume's files (answered by a node of the volume's
// region: tested with real agents in e2e).

// contractSkips are operations the contract test does not drive.
var contractSkips = []string{
	"/agent/", "/payments/", "/admin/clock", "/volumes/{id}/files",
	"/instances/{id}/log", // needs an agent with the log: e2e's TestGPULogsFollowReadsOnlyWhatIsNew
}

type contract struct {
	t        *testing.T
	e        *testEnv
	doc      *openapi3.T
	rng      *rand.Rand
	seed     uint64
	admin    string
	customer string
	aliceID  int64 // the customer
	calls    int   // requests sent, for the log
	// params fills a path's parameters: "{id}" by the path's first
	// segment (the fixture of that kind), others by name.
	params map[string]string
}

func newContract(t *testing.T) *contract {
	t.Helper()
	seed := uint64(27)
	if s := os.Getenv("CONTRACT_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CONTRACT_SEED=%q: %v", s, err)
		}
		seed = n
	}
	doc, _ := loadAPIDoc(t)
	c := &contract{t: t, e: newTestEnv(t), doc: doc, seed: seed, rng: rand.New(rand.NewPCG(seed, seed))}
	// The contract reads only that a what-if takes its body and answers
	// in its schema: one simulated day does, at half the time of the
	// other tests' two (the what-ifs were most of this walk's minute).
	c.e.web.whatIfs.days = 1
	t.Logf("contract seed %d (CONTRACT_SEED=%d reruns this run)", seed, seed)
	c.fixtures()
	return c
}

// fixtures make one of everything a path names, created through the API
// from the document's own examples, so the example bodies are proven
// accepted on the way (each is 201).
func (c *contract) fixtures() {
	t, e := c.t, c.e
	nodes := storetest.AddFleet(t, e.db, "n", "cd-1", "a100-80g", 4, 8)
	_, c.admin = e.apiToken("admin@example.com", gpuportal.RoleAdmin)
	alice, customer := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	c.aliceID, c.customer = alice.ID, customer
	bob := storetest.MustCreateUser(t, e.db, "bob@example.com", gpuportal.RoleCustomer)
	// The account the sign-in examples name (signing up again is a 409).
	if _, err := e.db.CreateUser(t.Context(), gpuportal.SignUp{Email: "dev@example.com", Password: "a-good-password", Name: "Dev"}, gpuportal.RoleCustomer, ""); err != nil {
		t.Fatal(err)
	}
	c.params = map[string]string{
		"models":   "a100-80g",
		"users":    fmt.Sprint(bob.ID),
		"nodes":    fmt.Sprint(nodes[0].ID),
		"provider": "test",
		"token":    "no-such-reset-link",
		"regions":  "cd-1",
	}
	created := func(path string, change func(map[string]any)) map[string]any {
		t.Helper()
		body := c.example("POST", path)
		if change != nil {
			change(body)
		}
		status, _, answer := c.call("POST", path, nil, body)
		if status != http.StatusCreated && status != http.StatusOK {
			t.Fatalf("POST %s with the document's example = %d %s", path, status, answer)
		}
		return decodeObject(t, answer)
	}
	// Two of each list's rows (paging and filters have rows to tell
	// apart); the second of a named thing takes another name.
	for _, kind := range []string{"reservations", "waitlist", "instances", "jobs", "volumes", "topups"} {
		c.params[kind] = fmt.Sprint(created("/"+kind, nil)["id"])
		c.params[kind] = fmt.Sprint(created("/"+kind, func(b map[string]any) {
			if _, named := b["name"]; named {
				b["name"] = fmt.Sprint(b["name"], "-2")
			}
		})["id"])
	}
	c.params["ssh-keys"] = fmt.Sprint(created("/ssh-keys", nil)["id"])
	volumeID, _ := strconv.ParseInt(c.params["volumes"], 10, 64)
	c.params["images"] = fmt.Sprint(created("/images", func(b map[string]any) { b["volume_id"] = volumeID })["id"])
	// A refund request needs money that was paid, not credited.
	event := fmt.Sprintf(`{"payment_id":"p-1","topup_id":%s,"amount_fen":50000,"status":"paid"}`, c.params["topups"])
	if status, body := e.postWebhook("test", event, testProvider{testPaymentSecret}.sign([]byte(event))); status != http.StatusOK {
		t.Fatalf("pay the fixture top-up = %d %s", status, body)
	}
	c.params["refund-requests"] = fmt.Sprint(created("/refund-requests", nil)["id"])
	c.params["admin-refund-requests"] = c.params["refund-requests"]
	c.params["teams"] = fmt.Sprint(created("/teams", nil)["id"])
	c.params["user_id"] = fmt.Sprint(alice.ID)
	c.params["token_id"] = "1"
	c.params["webhooks"] = fmt.Sprint(created("/webhooks", nil)["id"])
	hookID, _ := strconv.ParseInt(c.params["webhooks"], 10, 64)
	d, err := e.db.TestWebhook(t.Context(), &gpuportal.User{ID: alice.ID, Role: gpuportal.RoleCustomer}, hookID)
	if err != nil {
		t.Fatal(err)
	}
	c.params["delivery_id"] = fmt.Sprint(d.ID)
	c.params["uuid"] = nodes[0].GPUs[0].UUID // in service: its return is a 409
	c.params["maintenance"] = "999"          // none: its end is a 404
}

// skip says whether the contract test leaves path out (see contractSkips).
func skip(path string) bool {
	return slices.ContainsFunc(contractSkips, func(p string) bool { return strings.HasPrefix(path, p) })
}

// fill writes a documented path with the fixtures' ids.
func (c *contract) fill(path string) string {
	parts := strings.Split(path, "/")
	for k, p := range parts {
		name, ok := strings.CutPrefix(p, "{")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, "}")
		if name == "id" {
			name = parts[k-1]
			if parts[1] == "admin" && name == "refund-requests" {
				name = "admin-refund-requests"
			}
		}
		id, ok := c.params[name]
		if !ok {
			c.t.Fatalf("no fixture for %s in %s", p, path)
		}
		parts[k] = id
	}
	return strings.Join(parts, "/")
}

// tokenFor is who calls a route: an admin for /admin/, else a customer.
func (c *contract) tokenFor(path string) string {
	if strings.HasPrefix(path, "/admin/") {
		return c.admin
	}
	return c.customer
}

// call sends one request as the route's caller; body is JSON-encoded
// (a []byte is sent as is). Every exchange is checked against the
// document too (validatingTransport).
func (c *contract) call(method, path string, query url.Values, body any) (int, http.Header, string) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		raw, ok := body.([]byte)
		if !ok {
			raw, _ = json.Marshal(body)
		}
		r = bytes.NewReader(raw)
	}
	target := c.e.srv.URL + "/api/v1" + c.fill(path)
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	c.calls++
	req, _ := http.NewRequest(method, target, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.tokenFor(path))
	resp, err := (&http.Client{Transport: validatingTransport{c.t, http.DefaultTransport}}).Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw)
}

// example is the document's example body of an operation, decoded as
// JSON decodes it (a fresh copy each time: callers change it).
func (c *contract) example(method, path string) map[string]any {
	c.t.Helper()
	op := c.doc.Paths.Find(path).GetOperation(method)
	mt := op.RequestBody.Value.Content.Get("application/json")
	raw, _ := json.Marshal(mt.Example)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		c.t.Fatalf("%s %s: the example is not an object: %v", method, path, err)
	}
	return body
}

// refusedNaming checks an answer is a 400 invalid_input naming field.
func refusedNaming(status int, body, field string) bool {
	var env struct {
		Error struct{ Code, Field string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &env)
	return status == http.StatusBadRequest && env.Error.Code == gpuportal.EINVALID && env.Error.Field == field
}

// For each documented query parameter: allowed values are answered and
// do what the document says; values outside the schema are 400 naming it.
func TestContractQueryParameters(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	for _, path := range c.doc.Paths.InMatchingOrder() {
		op := c.doc.Paths.Find(path).Get
		if op == nil || skip(path) {
			continue
		}
		base := url.Values{}
		var params []*openapi3.Parameter
		for _, ref := range op.Parameters {
			p := ref.Value
			if p.In != "query" {
				continue
			}
			params = append(params, p)
			if p.Required {
				base.Set(p.Name, exampleValue(p))
			}
		}
		if len(params) == 0 {
			continue
		}
		status, _, body := c.call("GET", path, base, nil)
		if status != http.StatusOK {
			t.Errorf("GET %s?%s (the documented examples) = %d %s", path, base.Encode(), status, body)
			continue
		}
		for _, p := range params {
			with := func(v string) url.Values {
				q := url.Values{}
				for k, vs := range base {
					q[k] = vs
				}
				q.Set(p.Name, v)
				return q
			}
			// Allowed is read, not necessarily granted: the most GPUs
			// there are may be more than are free (409).
			for _, v := range allowedValues(p) {
				if status, _, body := c.call("GET", path, with(v), nil); status == http.StatusBadRequest || status >= 500 {
					t.Errorf("GET %s?%s = %d %s; the document allows it", path, with(v).Encode(), status, body)
				}
			}
			for _, v := range refusedValues(p.Schema.Value) {
				if status, _, body := c.call("GET", path, with(v), nil); !refusedNaming(status, body, p.Name) {
					t.Errorf("GET %s?%s = %d %s; want 400 naming %q", path, with(v).Encode(), status, body, p.Name)
				}
			}
			if p.Required {
				q := url.Values{}
				for k, vs := range base {
					q[k] = vs
				}
				q.Del(p.Name)
				if status, _, body := c.call("GET", path, q, nil); !refusedNaming(status, body, p.Name) {
					t.Errorf("GET %s without %s = %d %s; want 400 naming it", path, p.Name, status, body)
				}
			}
		}
		c.checkListSemantics(path, op, base)
	}
	t.Logf("%d requests", c.calls)
}

// checkListSemantics holds a list route to what its parameters mean:
// limit bounds the rows, offset skips them, X-Total-Count counts them all,
// and an enum filter named like a field of the rows returns only rows
// with that value.
func (c *contract) checkListSemantics(path string, op *openapi3.Operation, base url.Values) {
	t := c.t
	t.Helper()
	rowSchema := listRowSchema(op)
	if rowSchema == nil {
		return
	}
	rows := func(q url.Values) ([]map[string]any, string) {
		status, header, body := c.call("GET", path, q, nil)
		var list []map[string]any
		if status != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("GET %s?%s = %d %s; want a list", path, q.Encode(), status, body)
		}
		return list, header.Get("X-Total-Count")
	}
	all, total := rows(base)
	names := map[string]*openapi3.Parameter{}
	for _, ref := range op.Parameters {
		names[ref.Value.Name] = ref.Value
	}
	if names["limit"] != nil && names["offset"] != nil { // a paged list
		if total != strconv.Itoa(len(all)) {
			t.Errorf("GET %s: X-Total-Count %q for %d rows", path, total, len(all))
		}
		q := cloneValues(base)
		q.Set("limit", "1")
		if one, _ := rows(q); len(one) != min(1, len(all)) || len(all) > 0 && one[0]["id"] != all[0]["id"] {
			t.Errorf("GET %s?limit=1 = %d rows; want the first of %d", path, len(one), len(all))
		}
	}
	if names["offset"] != nil && len(all) > 1 {
		q := cloneValues(base)
		q.Set("offset", "1")
		if rest, _ := rows(q); len(rest) != len(all)-1 || rest[0]["id"] != all[1]["id"] {
			t.Errorf("GET %s?offset=1 = %d rows; want all but the first of %d", path, len(rest), len(all))
		}
	}
	for name, p := range names {
		if p.In != "query" || len(p.Schema.Value.Enum) == 0 || rowSchema.Properties[name] == nil {
			continue
		}
		for _, v := range p.Schema.Value.Enum {
			q := cloneValues(base)
			q.Set(name, fmt.Sprint(v))
			got, _ := rows(q)
			for _, row := range got {
				if fmt.Sprint(row[name]) != fmt.Sprint(v) {
					t.Errorf("GET %s?%s answered a row with %s %v", path, q.Encode(), name, row[name])
				}
			}
		}
	}
}

// listRowSchema is the object schema of a list answer's rows (nil when
// the 200 answer is not a JSON array of objects).
func listRowSchema(op *openapi3.Operation) *openapi3.Schema {
	ok := op.Responses.Status(http.StatusOK)
	if ok == nil || ok.Value.Content.Get("application/json") == nil {
		return nil
	}
	s := ok.Value.Content.Get("application/json").Schema.Value
	if !s.Type.Is("array") || s.Items == nil || !s.Items.Value.Type.Is("object") {
		return nil
	}
	return s.Items.Value
}

// exampleValue is a query parameter's documented example as a string.
func exampleValue(p *openapi3.Parameter) string {
	if p.Example != nil {
		return fmt.Sprint(p.Example)
	}
	if p.Schema.Value.Example != nil {
		return fmt.Sprint(p.Schema.Value.Example)
	}
	return ""
}

// allowedValues are values of a query parameter its schema allows and a
// script would send: each enum value, the bounds, the example.
func allowedValues(p *openapi3.Parameter) []string {
	s := p.Schema.Value
	var vs []string
	for _, v := range s.Enum {
		vs = append(vs, fmt.Sprint(v))
	}
	if s.Type.Is("integer") {
		if s.Min != nil {
			vs = append(vs, strconv.FormatFloat(*s.Min, 'f', -1, 64))
		}
		if s.Max != nil {
			vs = append(vs, strconv.FormatFloat(*s.Max, 'f', -1, 64))
		}
	}
	if v := exampleValue(p); v != "" {
		vs = append(vs, v)
	}
	return vs
}

// refusedValues are values a query parameter's schema does not allow.
func refusedValues(s *openapi3.Schema) []string {
	var vs []string
	switch {
	case s.Type.Is("integer"):
		vs = append(vs, "seven", "1.5")
		if s.Min != nil {
			vs = append(vs, strconv.FormatFloat(*s.Min-1, 'f', -1, 64))
		}
		if s.Max != nil {
			vs = append(vs, strconv.FormatFloat(*s.Max+1, 'f', -1, 64))
		}
	case s.Type.Is("number"):
		vs = append(vs, "seven")
	case s.Type.Is("boolean"):
		vs = append(vs, "maybe")
	case s.Type.Is("string"):
		if len(s.Enum) > 0 {
			vs = append(vs, "not-one-of-them")
		}
		switch s.Format {
		case "date-time", "date":
			vs = append(vs, "not-a-time")
		}
		if s.MaxLength != nil {
			vs = append(vs, strings.Repeat("x", int(*s.MaxLength)+1))
		}
	}
	return vs
}

// For each JSON request body: a body that breaks one rule of its schema
// is refused with a 4xx (a wrong type or a value out of range is 400
// naming the field), and bodies within the schema (the example, and the
// example with random optional fields left out) are never 400.
func TestContractRequestBodies(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	type op struct {
		method, path string
		schema       *openapi3.Schema
	}
	var ops []op
	for _, path := range c.doc.Paths.InMatchingOrder() {
		if skip(path) {
			continue
		}
		for method, o := range c.doc.Paths.Find(path).Operations() {
			if o.RequestBody == nil || o.RequestBody.Value.Content.Get("application/json") == nil {
				continue
			}
			ops = append(ops, op{method, path, o.RequestBody.Value.Content.Get("application/json").Schema.Value})
		}
	}
	slices.SortFunc(ops, func(a, b op) int { return strings.Compare(a.method+a.path, b.method+b.path) })
	// The invalid bodies first, for every route: they change nothing, so
	// the fixtures are as made when each is sent. What they test is the
	// reading of a request, the same whatever the engine: the SQLite pass
	// sends them; both passes send the bodies that reach the store.
	refused := ops
	if storetest.Engine() == "postgres" {
		refused = nil
	}
	for _, o := range refused {
		for _, bad := range invalidBodies(c.example(o.method, o.path), o.schema) {
			if err := c.doc.ValidateSchemaJSON(o.schema, bad.body); err == nil {
				t.Errorf("%s %s: the generator's %s is valid by the schema (generator bug)", o.method, o.path, bad.why)
				continue
			}
			status, _, body := c.call(o.method, o.path, nil, bad.body)
			switch {
			case bad.field != "" && !refusedNaming(status, body, bad.field):
				t.Errorf("%s %s with %s = %d %s; want 400 naming %q (seed %d)", o.method, o.path, bad.why, status, body, bad.field, c.seed)
			case status < 400 || status >= 500 || status == http.StatusUnauthorized || status == http.StatusNotFound:
				t.Errorf("%s %s with %s = %d %s; want it refused (seed %d)", o.method, o.path, bad.why, status, body, c.seed)
			}
		}
		for _, raw := range []string{`[]`, `"body"`, `{"a":1} {"b":2}`, `{`} {
			if status, _, body := c.call(o.method, o.path, nil, []byte(raw)); status != http.StatusBadRequest {
				t.Errorf("%s %s with body %s = %d %s; want 400", o.method, o.path, raw, status, body)
			}
		}
	}
	// Then the valid ones. Not 400 is the contract: a 409 (already
	// booked, nothing to claim) says the body was read.
	for _, o := range ops {
		example := c.example(o.method, o.path)
		if err := c.doc.ValidateSchemaJSON(o.schema, example); err != nil {
			t.Errorf("%s %s: the example does not match its schema: %v", o.method, o.path, err)
		}
		bodies := []map[string]any{example}
		for range 3 {
			// Optional alone is not enough to leave a field out where
			// the schema asks for one of two (anyOf); those it refuses.
			if b := c.withoutSomeOptional(example, o.schema); c.doc.ValidateSchemaJSON(o.schema, b) == nil {
				bodies = append(bodies, b)
			}
		}
		for _, body := range bodies {
			if o.path == "/auth/password" { // the example's current password again
				_, _ = c.e.db.ChangePassword(t.Context(), c.aliceID, "a-new-password-1", storetest.Password, false)
			}
			if status, _, answer := c.call(o.method, o.path, nil, body); status == http.StatusBadRequest || status >= 500 {
				t.Errorf("%s %s with %s = %d %s; the document allows this body (seed %d)", o.method, o.path, mustJSON(body), status, answer, c.seed)
			}
		}
	}
	t.Logf("%d operations, %d requests", len(ops), c.calls)
}

type invalidBody struct {
	why   string
	body  map[string]any
	field string // the field a 400 must name ("" when any 4xx will do)
}

// invalidBodies breaks the example one rule of the schema at a time: an
// unknown field, each required field left out, each field of the wrong
// type, and each value beyond an enum, a bound or a length.
func invalidBodies(example map[string]any, s *openapi3.Schema) []invalidBody {
	with := func(field string, v any) map[string]any {
		b := cloneBody(example)
		b[field] = v
		return b
	}
	out := []invalidBody{{why: "an unknown field", body: with("no_such_field", 1), field: "no_such_field"}}
	for _, name := range s.Required {
		b := cloneBody(example)
		delete(b, name)
		out = append(out, invalidBody{why: "no " + name, body: b})
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := s.Properties[name].Value
		if v, ok := wrongTypeValue(p); ok {
			out = append(out, invalidBody{why: fmt.Sprintf("%s of the wrong type (%v)", name, v), body: with(name, v), field: name})
		}
		for _, v := range outOfSchema(p) {
			out = append(out, invalidBody{why: fmt.Sprintf("%s out of its schema (%v)", name, v), body: with(name, v), field: name})
		}
	}
	return out
}

// wrongTypeValue is a JSON value not of the schema's type.
func wrongTypeValue(s *openapi3.Schema) (any, bool) {
	switch {
	case s.Type.Is("integer"), s.Type.Is("number"):
		return "seven", true
	case s.Type.Is("string"):
		return 7, true
	case s.Type.Is("boolean"):
		return "yes", true
	case s.Type.Is("array"):
		return "not a list", true
	case s.Type.Is("object"):
		return []any{"not an object"}, true
	}
	return nil, false
}

// outOfSchema are values of the schema's type that it still refuses.
func outOfSchema(s *openapi3.Schema) []any {
	var vs []any
	if len(s.Enum) > 0 && s.Type.Is("string") {
		vs = append(vs, "not-one-of-them")
	}
	if s.Type.Is("integer") {
		vs = append(vs, 1.5)
		if s.Min != nil {
			vs = append(vs, *s.Min-1)
		}
		if s.Max != nil {
			vs = append(vs, *s.Max+1)
		}
	}
	if s.Type.Is("string") {
		if s.MaxLength != nil {
			vs = append(vs, strings.Repeat("x", int(*s.MaxLength)+1))
		}
		if s.Format == "date-time" {
			vs = append(vs, "not-a-time")
		}
	}
	return vs
}

// withoutSomeOptional is the example with a random set of its optional
// fields left out (the seed picks which).
func (c *contract) withoutSomeOptional(example map[string]any, s *openapi3.Schema) map[string]any {
	b := cloneBody(example)
	names := make([]string, 0, len(example))
	for name := range example {
		names = append(names, name)
	}
	slices.Sort(names) // the seed alone picks, not the map's order
	for _, name := range names {
		if !slices.Contains(s.Required, name) && c.rng.IntN(2) == 0 {
			delete(b, name)
		}
	}
	return b
}

func cloneBody(b map[string]any) map[string]any {
	raw, _ := json.Marshal(b)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}
