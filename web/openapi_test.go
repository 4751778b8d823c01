package web

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"gpuportal/web/openapi"
)

var (
	apiDocOnce   sync.Once
	apiDoc       *openapi3.T
	apiDocRouter routers.Router
	apiDocErr    error
)

// loadAPIDoc parses and validates the OpenAPI document (kin-openapi).
func loadAPIDoc(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	apiDocOnce.Do(func() {
		loader := openapi3.NewLoader()
		if apiDoc, apiDocErr = loader.LoadFromData(openapi.Document); apiDocErr != nil {
			return
		}
		if apiDocErr = apiDoc.Validate(context.Background()); apiDocErr != nil {
			return
		}
		apiDocRouter, apiDocErr = gorillamux.NewRouter(apiDoc)
	})
	if apiDocErr != nil {
		t.Fatalf("openapi.json: %v", apiDocErr)
	}
	return apiDoc, apiDocRouter
}

// The OpenAPI document is valid and describes exactly the router's API
// routes: a route missing from it (or described but gone) fails here.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	doc, _ := loadAPIDoc(t)
	e := newTestEnv(t)
	routes := map[string]bool{}
	for _, r := range e.web.echo.Routes() {
		path, ok := strings.CutPrefix(r.Path, "/api/v1")
		if !ok || path == "" || strings.HasSuffix(path, "/*") || r.Method == "echo_route_not_found" {
			continue
		}
		parts := strings.Split(path, "/")
		for k, p := range parts {
			if name, isParam := strings.CutPrefix(p, ":"); isParam {
				parts[k] = "{" + name + "}"
			}
		}
		path = strings.Join(parts, "/")
		routes[r.Method+" "+path] = true
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("openapi.json does not describe %s %s", r.Method, path)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !routes[method+" "+path] {
				t.Errorf("openapi.json describes %s %s, which the router does not have", method, path)
			}
		}
	}
}

// validatingTransport checks every API exchange against the OpenAPI
// document: every answer, and every request the API accepted (tests send
// bad ones on purpose).
type validatingTransport struct {
	t    testing.TB
	base http.RoundTripper
}

func (v validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := v.base.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, "/api/v1/") {
		return resp, err
	}
	respBody, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	_, router := loadAPIDoc(v.t)
	check := req.Clone(context.Background())
	check.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := router.FindRoute(check)
	if err != nil {
		return resp, nil // not an API route: TestOpenAPIDescribesEveryRoute covers the routes
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route, Options: opts}
	if resp.StatusCode < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			v.t.Errorf("openapi: %s %s was accepted but does not match the document: %v", req.Method, req.URL.Path, err)
		}
	}
	// Every refusal a client can meet is listed with its status (not only
	// under "default"), so a generated client and a reader know it.
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && route.Operation.Responses.Status(resp.StatusCode) == nil {
		v.t.Errorf("openapi: %s %s answered %d, which the document does not list for %s %s", req.Method, req.URL.Path, resp.StatusCode, route.Method, route.Path)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(respBody)), Options: opts}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		v.t.Errorf("openapi: the answer to %s %s (%d) does not match the document: %v\n%s", req.Method, req.URL.RequestURI(), resp.StatusCode, err, respBody)
	}
	return resp, nil
}

// (issue 27, part) Every operation has an operationId of its own, so
// generated clients get a method per route.
func TestOpenAPIOperationIDs(t *testing.T) {
	t.Parallel()
	doc, _ := loadAPIDoc(t)
	seen := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", where)
				continue
			}
			if other, dup := seen[op.OperationID]; dup {
				t.Errorf("%s and %s share operationId %s", where, other, op.OperationID)
			}
			seen[op.OperationID] = where
		}
	}
}

// (issue 27) Every operation lists the refusals a client meets (4XX, each
// with its status; the API tests' traffic checks them in
// validatingTransport) and shows an example of every JSON body it takes
// and answers with, so a reader sees a real exchange. The examples are
// validated against their schemas when the document loads; `make
// lint-openapi` (Redocly) also refuses properties a schema does not name.
func TestOpenAPIExamplesAndRefusals(t *testing.T) {
	t.Parallel()
	doc, _ := loadAPIDoc(t)
	hasExample := func(mt *openapi3.MediaType) bool {
		return mt.Example != nil || len(mt.Examples) > 0 || (mt.Schema != nil && mt.Schema.Value != nil && mt.Schema.Value.Example != nil)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			refusals := 0
			for status, resp := range op.Responses.Map() {
				if strings.HasPrefix(status, "4") {
					refusals++
				}
				if !strings.HasPrefix(status, "2") || resp.Value == nil {
					continue
				}
				if mt := resp.Value.Content.Get("application/json"); mt != nil && !hasExample(mt) {
					t.Errorf("%s: the %s answer has no example", where, status)
				}
			}
			if refusals == 0 {
				t.Errorf("%s lists no 4XX answer", where)
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil && !hasExample(mt) {
					t.Errorf("%s: the request body has no example", where)
				}
			}
		}
	}
}
