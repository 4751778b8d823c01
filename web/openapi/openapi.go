// Package openapi holds the API's OpenAPI 3.1 description (openapi.json),
// served at /api/v1/openapi.json and shown at /api. Tests check it against
// the router's routes and validate the API tests' traffic with it.
package openapi

import (
	_ "embed"
	"encoding/json"
	"slices"
	"strings"
)

// Document is the OpenAPI document.
//
//go:embed openapi.json
var Document []byte

// Operation is one method on one path, as the reference page lists it.
type Operation struct {
	Method, Path, Summary, Tag string
	Public                     bool // needs no sign-in
}

// Operations lists the document's operations grouped by tag (in the
// order tags first appear), then by path.
func Operations() ([]Operation, error) {
	var doc struct {
		Paths map[string]map[string]struct {
			Summary  string           `json:"summary"`
			Tags     []string         `json:"tags"`
			Security []map[string]any `json:"security"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(Document, &doc); err != nil {
		return nil, err
	}
	var out []Operation
	for path, methods := range doc.Paths {
		for method, op := range methods {
			tag := ""
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			public := slices.ContainsFunc(op.Security, func(m map[string]any) bool { return len(m) == 0 })
			out = append(out, Operation{Method: strings.ToUpper(method), Path: path, Summary: op.Summary, Tag: tag, Public: public})
		}
	}
	order := []string{"Accounts", "Catalog and availability", "Reservations", "Waitlist", "Instances", "Jobs", "Money", "Notifications", "Admin", "Agents"}
	slices.SortFunc(out, func(a, b Operation) int {
		ia, ib := slices.Index(order, a.Tag), slices.Index(order, b.Tag)
		if ia != ib {
			return ia - ib
		}
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	return out, nil
}
