package web

import (
	"bytes"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
)

// Request bodies as JSON Schema reads them. The OpenAPI document types
// request fields with JSON Schema, and scripts are written against it, so
// the decoder agrees with it where Go's encoding/json would not:
//   - 1.0 and 1e2 are integers (JSON Schema: an integer is any number
//     with a zero fractional part); 1.5 is refused.
//   - null is not a value of a string, number, boolean or object field
//     (Go would leave the field as it was and say nothing); it is one of
//     a list or a map, which the portal itself writes as null when empty.

// maxJSONBody bounds request bodies; nothing the API accepts is larger.
const maxJSONBody = 1 << 20

// bindJSON decodes a JSON request body strictly: unknown fields, wrong
// types, trailing data and oversized bodies are invalid_input, never a 500.
func bindJSON(c echo.Context, dst any) error {
	return decodeStrict(http.MaxBytesReader(c.Response(), c.Request().Body, maxJSONBody), dst)
}

// decodeStrict decodes exactly one JSON value with no unknown fields.
func decodeStrict(r io.Reader, dst any) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body must be a single JSON object.")
	}
	conformed, err := conform(raw, reflect.TypeOf(dst).Elem(), "")
	if err != nil {
		return err
	}
	body, err := json.Marshal(conformed)
	if err != nil {
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body is not valid JSON.")
	}
	strict := json.NewDecoder(bytes.NewReader(body))
	strict.DisallowUnknownFields()
	if err := strict.Decode(dst); err != nil {
		return jsonError(err)
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// conform walks a decoded body along the Go type it is meant for: it
// refuses null where the type has no null and writes integral numbers
// meant for integer fields as integers. What it does not recognise (an
// unknown field, a wrong type) it leaves for the strict decode to refuse.
func conform(v any, t reflect.Type, field string) (any, error) {
	if v == nil {
		switch t.Kind() {
		case reflect.Slice, reflect.Map, reflect.Interface:
			return nil, nil
		}
		if field == "" {
			return nil, gpuportal.Errorf(gpuportal.EINVALID, "The request body must be a JSON object, not null.")
		}
		return nil, wrongType(field, t)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != reflect.TypeFor[time.Time]() && reflect.PointerTo(t).Implements(unmarshalerType) {
		return v, nil // the type reads itself
	}
	if field != "" && !sameKind(v, t) {
		// Said here, by the JSON name: encoding/json would name the
		// field by its Go path (an embedded struct's type name in it).
		return nil, wrongType(field, t)
	}
	switch v := v.(type) {
	case json.Number:
		if isInteger(t.Kind()) {
			n := integral(v)
			if !fitsInteger(string(n), t) {
				return nil, wrongType(field, t)
			}
			return n, nil
		}
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for key, val := range v {
				ft, ok := fields[key]
				if !ok {
					ft, ok = foldedField(fields, key)
				}
				if !ok {
					continue
				}
				c, err := conform(val, ft, joinField(field, key))
				if err != nil {
					return nil, err
				}
				v[key] = c
			}
		case reflect.Map:
			for key, val := range v {
				c, err := conform(val, t.Elem(), joinField(field, key))
				if err != nil {
					return nil, err
				}
				v[key] = c
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for k, val := range v {
				c, err := conform(val, t.Elem(), field)
				if err != nil {
					return nil, err
				}
				v[k] = c
			}
		}
	}
	return v, nil
}

// sameKind says whether a decoded JSON value can be one of t's values at
// all (whether the number fits is the strict decode's to say).
func sameKind(v any, t reflect.Type) bool {
	if t == reflect.TypeFor[time.Time]() {
		_, ok := v.(string)
		return ok
	}
	switch t.Kind() {
	case reflect.String:
		_, ok := v.(string)
		return ok
	case reflect.Bool:
		_, ok := v.(bool)
		return ok
	case reflect.Float32, reflect.Float64:
		_, ok := v.(json.Number)
		return ok
	case reflect.Struct:
		_, ok := v.(map[string]any)
		return ok
	case reflect.Map:
		_, ok := v.(map[string]any)
		return ok
	case reflect.Slice, reflect.Array:
		_, ok := v.([]any)
		return ok
	}
	if isInteger(t.Kind()) {
		_, ok := v.(json.Number)
		return ok
	}
	return true
}

// fitsInteger says whether a number written as digits is one of t's
// integers (a fraction left, or one too large, is not).
func fitsInteger(s string, t reflect.Type) bool {
	var err error
	switch t.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		_, err = strconv.ParseUint(s, 10, t.Bits())
	default:
		_, err = strconv.ParseInt(s, 10, t.Bits())
	}
	return err == nil
}

func isInteger(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// integral writes n without fraction or exponent when its value is a
// whole number (1.0, 2.50e1 → 25); otherwise it is left as written, and
// the strict decode refuses it as not a whole number. An exponent beyond
// ±400 is left too: no integer field holds such a number, and expanding
// it would cost what the sender chose.
func integral(n json.Number) json.Number {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		return n
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > 400 || exp < -400 {
			return n
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() {
		return n
	}
	return json.Number(r.Num().String())
}

// jsonFields are the fields encoding/json decodes into t, by JSON name
// (embedded structs' fields promoted).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, ok := fields[k]; !ok {
						fields[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}

// foldedField finds key the way encoding/json does when no field has
// exactly its name: case-insensitively.
func foldedField(fields map[string]reflect.Type, key string) (reflect.Type, bool) {
	for name, t := range fields {
		if strings.EqualFold(name, key) {
			return t, true
		}
	}
	return nil, false
}

func joinField(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var maxErr *http.MaxBytesError
	switch {
	case err == io.EOF:
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body is empty; send a JSON object.")
	case asErr(err, &typeErr) && typeErr.Field == "":
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body must be a JSON object, not %s.", typeErr.Value)
	case asErr(err, &typeErr):
		return wrongType(typeErr.Field, typeErr.Type)
	case asErr(err, &syntaxErr):
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body is not valid JSON (at byte %d).", syntaxErr.Offset)
	case asErr(err, &maxErr):
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body is too large.")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return gpuportal.FieldErrorf(gpuportal.EINVALID, field, "Unknown field %q.", field)
	}
	return gpuportal.Errorf(gpuportal.EINVALID, "The request body is not valid JSON.")
}

// wrongType says what a field must be in JSON's words (never the Go
// type's name: that is the portal's business).
func wrongType(field string, t reflect.Type) error {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	format := "The field %q must be an object."
	switch t.Kind() {
	case reflect.String:
		format = "The field %q must be a string."
	case reflect.Bool:
		format = "The field %q must be true or false."
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		format = "The field %q must be a whole number."
	case reflect.Float32, reflect.Float64:
		format = "The field %q must be a number."
	case reflect.Slice, reflect.Array:
		format = "The field %q must be a list."
	}
	if t == reflect.TypeFor[time.Time]() {
		format = "The field %q must be an RFC 3339 time."
	}
	return gpuportal.FieldErrorf(gpuportal.EINVALID, field, format, field)
}
