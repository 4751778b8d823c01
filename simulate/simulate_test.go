package simulate

import (
	"bytes"
	"context"
	"testing"
)

func TestDemoWeek(t *testing.T) {
	for _, name := range []string{"demo", "peak"} {
		r, err := Run(context.Background(), Options{Scenario: Builtin[name], Days: 7, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		r.Write(&b)
		t.Log("\n" + b.String())
	}
}
