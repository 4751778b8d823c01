// Package i18n translates the portal's text. English strings are the keys
// (gettext style): a string without a translation shows in English, so a
// missing entry is a cosmetic bug, never a broken page.
package i18n

import (
	"context"
	"fmt"
	"strings"

	"gpuportal"
)

// Languages the portal offers, in the order the switcher shows them.
var Languages = []struct{ Code, Label string }{
	{gpuportal.LangChinese, "中文"},
	{gpuportal.LangEnglish, "English"},
}

// T translates an English string (a fmt format when args are given) into lang.
func T(lang, key string, args ...any) string {
	if lang == gpuportal.LangChinese {
		if zh, ok := zhCN[key]; ok {
			key = zh
		}
	}
	if len(args) == 0 {
		return key
	}
	return fmt.Sprintf(key, args...)
}

// Has reports whether key has a zh-CN translation (used by tests).
func Has(key string) bool { _, ok := zhCN[key]; return ok }

// Error translates a gpuportal error's message into lang.
func Error(lang string, err error) string {
	if e, ok := err.(*gpuportal.Error); ok && e.Format != "" {
		return T(lang, e.Format, e.Args...)
	}
	return T(lang, gpuportal.ErrorMessage(err))
}

// Negotiate picks the portal language for an Accept-Language header:
// Chinese when the first language the browser names that we speak is
// Chinese, English otherwise.
func Negotiate(acceptLanguage string) string {
	for _, part := range strings.Split(acceptLanguage, ",") {
		tag, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		tag = strings.ToLower(tag)
		switch {
		case strings.HasPrefix(tag, "zh"):
			return gpuportal.LangChinese
		case strings.HasPrefix(tag, "en"):
			return gpuportal.LangEnglish
		}
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
