// Package i18n translates the portal's text. English strings are the keys
// (gettext style): a string without a translation shows in English, so a
// missing entry is a cosmetic bug, never a broken page.
package i18n

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"

	"gpuportal"
)

// Languages the portal offers, in the order the switcher shows them.
var Languages = []struct{ Code, Label string }{
	{gpuportal.LangChinese, "中文"},
	{gpuportal.LangEnglish, "English"},
}

// T translates an English string (a fmt format when args are given) into
// lang. In English a count of one takes the singular ("1 GPU", "2 GPUs"):
// the plural rule is CLDR's, through golang.org/x/text; Chinese has no
// plural forms.
func T(lang, key string, args ...any) string {
	if lang == gpuportal.LangChinese {
		if zh, ok := zhCN[key]; ok {
			key = zh
		}
	} else if len(args) > 0 {
		key = singularFor(key, args)
	}
	if len(args) == 0 {
		return key
	}
	return fmt.Sprintf(key, args...)
}

// countedNouns are the English nouns that follow a count ("%d GPUs"), with
// their singular.
var countedNouns = map[string]string{
	"GPUs": "GPU", "GPU-hours": "GPU-hour", "hours": "hour", "minutes": "minute", "seconds": "second", "days": "day",
	"nodes": "node", "tasks": "task", "problems": "problem", "attempts": "attempt", "instances": "instance",
	"reservations": "reservation", "bookings": "booking", "entries": "entry", "interruptions": "interruption",
}

var countedNoun = regexp.MustCompile(`%d (GPU-hours|GPUs|hours|minutes|seconds|days|nodes|tasks|problems|attempts|instances|reservations|bookings|entries|interruptions)\b`)

var countsCache sync.Map // format → the indexes of its count arguments

// countArgs lists which arguments of format count a noun (by position of
// their verb; "%%" is no verb).
func countArgs(format string) []int {
	if v, ok := countsCache.Load(format); ok {
		return v.([]int)
	}
	var out []int
	for _, m := range countedNoun.FindAllStringIndex(format, -1) {
		out = append(out, verbsBefore(format, m[0]))
	}
	countsCache.Store(format, out)
	return out
}

func verbsBefore(format string, at int) int {
	return strings.Count(strings.ReplaceAll(format[:at], "%%", ""), "%")
}

// singularFor puts the nouns of format whose count is one in the singular.
func singularFor(format string, args []any) string {
	for _, arg := range countArgs(format) {
		if arg >= len(args) || !isOne(args[arg]) {
			continue
		}
		for _, m := range countedNoun.FindAllStringSubmatchIndex(format, -1) {
			if verbsBefore(format, m[0]) == arg {
				format = format[:m[2]] + countedNouns[format[m[2]:m[3]]] + format[m[3]:]
				break
			}
		}
	}
	return format
}

// isOne reports whether a count argument takes English's "one" form.
func isOne(v any) bool {
	var n int
	switch c := v.(type) {
	case int:
		n = c
	case int64:
		n = int(c)
	default:
		return false
	}
	if n < 0 {
		n = -n
	}
	return plural.Cardinal.MatchPlural(language.English, n, 0, 0, 0, 0) == plural.One
}

// Has reports whether key has a zh-CN translation (used by tests).
func Has(key string) bool { _, ok := zhCN[key]; return ok }

// Error translates a gpuportal error's message into lang.
func Error(lang string, err error) string {
	var e *gpuportal.Error
	if errors.As(err, &e) && e.Format != "" {
		return T(lang, e.Format, e.Args...)
	}
	return T(lang, gpuportal.ErrorMessage(err))
}

// matcher matches a browser's languages against the portal's (the first
// is the default).
var matcher = language.NewMatcher([]language.Tag{language.English, language.SimplifiedChinese})

// Negotiate picks the portal language for an Accept-Language header: the
// best match of what the browser asks for, by its preferences (x/text's
// language.Matcher), English when nothing matches.
func Negotiate(acceptLanguage string) string {
	tags, _, err := language.ParseAcceptLanguage(acceptLanguage)
	if err != nil || len(tags) == 0 {
		return gpuportal.LangEnglish
	}
	_, index, confidence := matcher.Match(tags...)
	if index == 1 && confidence != language.No {
		return gpuportal.LangChinese
	}
	return gpuportal.LangEnglish
}

type ctxKey struct{}

// WithLang returns a context that carries the request's language.
func WithLang(ctx context.Context, lang string) context.Context {
	return context.WithValue(ctx, ctxKey{}, lang)
}

// Lang returns the language carried by ctx (English when none).
func Lang(ctx context.Context) string {
	if l, ok := ctx.Value(ctxKey{}).(string); ok {
		return l
	}
	return gpuportal.LangEnglish
}

// Tc translates using the language carried by ctx; templates call it.
func Tc(ctx context.Context, key string, args ...any) string {
	return T(Lang(ctx), key, args...)
}
