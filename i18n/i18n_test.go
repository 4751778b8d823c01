package i18n

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gpuportal"
)

// Every string the portal shows through T, Tc or an error constructor has a
// Chinese translation: the test reads the source, so a new English string
// without one fails here rather than in front of a customer.
func TestEveryStringHasAChineseTranslation(t *testing.T) {
	calls := regexp.MustCompile(`(?:\bT\((?:ctx|lang|[a-zA-Z.()]+), |\bT\(|\bTc\(ctx, |Errorf\(gpuportal\.E[A-Z]+, |Errorf\(E[A-Z]+, |FieldErrorf\((?:gpuportal\.)?E[A-Z]+, [^,]+, )("(?:[^"\\]|\\.)*")`)
	root := ".."
	var missing []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		name := d.Name()
		if d.IsDir() || strings.HasSuffix(name, "_templ.go") || strings.HasSuffix(name, "_test.go") ||
			!(strings.HasSuffix(name, ".go") || strings.HasSuffix(name, ".templ")) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range calls.FindAllSubmatch(src, -1) {
			key, err := strconv.Unquote(string(m[1]))
			if err != nil {
				t.Errorf("%s: cannot unquote %s", path, m[1])
				continue
			}
			if !Has(key) {
				missing = append(missing, path+": "+strconv.Quote(key))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("%d strings without a zh-CN translation:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}

func TestTranslationsKeepTheirVerbs(t *testing.T) {
	verbs := regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z%]`)
	for en, zh := range zhCN {
		if got, want := verbs.FindAllString(zh, -1), verbs.FindAllString(en, -1); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%q → %q: verbs %v, want %v", en, zh, got, want)
		}
	}
}

func TestNegotiate(t *testing.T) {
	for _, tt := range []struct{ header, want string }{
		{"", "en"}, {"zh-CN,zh;q=0.9", "zh-CN"}, {"zh-TW", "zh-CN"}, {"en-US,en;q=0.9,zh;q=0.8", "en"}, {"fr,zh;q=0.5", "zh-CN"}, {"fr", "en"},
	} {
		if got := Negotiate(tt.header); got != tt.want {
			t.Errorf("Negotiate(%q) = %q; want %q", tt.header, got, tt.want)
		}
	}
}

func TestPlurals(t *testing.T) {
	for _, tc := range []struct {
		lang, key string
		args      []any
		want      string
	}{
		{"en", "%d GPUs", []any{1}, "1 GPU"},
		{"en", "%d GPUs", []any{2}, "2 GPUs"},
		{"en", "%d GPUs", []any{0}, "0 GPUs"},
		{"en", "%d GPUs, %d healthy, %d out of service", []any{1, 1, 0}, "1 GPU, 1 healthy, 0 out of service"},
		{"en", "%d nodes: %d online, %d draining, %d offline", []any{1, 1, 0, 0}, "1 node: 1 online, 0 draining, 0 offline"},
		{"en", "%s: %d GPUs for %d hours", []any{"A100", 8, 1}, "A100: 8 GPUs for 1 hour"},
		{"en", "100%% of %d GPU-hours", []any{1}, "100% of 1 GPU-hour"},
		{"zh-CN", "%d GPUs, %d healthy, %d out of service", []any{1, 1, 0}, "1 张 GPU：1 张健康，0 张停用"},
	} {
		if got := T(tc.lang, tc.key, tc.args...); got != tc.want {
			t.Errorf("T(%s, %q, %v) = %q, want %q", tc.lang, tc.key, tc.args, got, tc.want)
		}
	}
}

// An error a store step wrapped ("book: …: %w") still shows in the
// reader's language: Error looks through the wrapping.
func TestErrorTranslatesThroughWrapping(t *testing.T) {
	notFound := gpuportal.Errorf(gpuportal.ENOTFOUND, "Reservation %d not found.", 7)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"as returned", notFound, "预订 7 不存在。"},
		{"wrapped once", fmt.Errorf("cancel: %w", notFound), "预订 7 不存在。"},
		{"wrapped twice", fmt.Errorf("cancel: load: %w", fmt.Errorf("read: %w", notFound)), "预订 7 不存在。"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Error("zh-CN", c.err); got != c.want {
				t.Errorf("Error(zh-CN, %v) = %q, want %q", c.err, got, c.want)
			}
		})
	}
}
