package stream

import (
	"bytes"
	"io"
	"testing"

	"gpuportal"
)

// (DESIGN §8: parsers are fuzzed) Whatever frames the other end of a
// session stream sends — a node's agent, or through it a customer's
// program — reading them never panics: a control ends the stream or
// reaches OnControl, output goes to its stream by its first byte, and the
// rest is dropped.
func FuzzStreamFrames(f *testing.F) {
	f.Add(true, []byte(`{"exit":3}`))
	f.Add(true, []byte(`{"resize":{"cols":-1,"rows":99999999}}`))
	f.Add(true, []byte(`{"signal":"KILL","error":""}`))
	f.Add(false, []byte{gpuportal.StreamStdout, 'h', 'i'})
	f.Add(false, []byte{gpuportal.StreamStderr, 0xff})
	f.Add(false, []byte{})
	f.Add(true, []byte(`{"exit":null,"eof":"yes"}`))
	f.Fuzz(func(t *testing.T, text bool, msg []byte) {
		var stderr bytes.Buffer
		var controls []gpuportal.SessionControl
		c := &Conn{Stderr: &stderr, OnControl: func(ctl gpuportal.SessionControl) { controls = append(controls, ctl) }}
		if err := c.take(text, msg); err != nil {
			t.Fatalf("take(%v, %q): %v", text, msg, err)
		}
		if !text && len(msg) > 0 {
			if msg[0] == gpuportal.StreamStderr && !bytes.Equal(stderr.Bytes(), msg[1:]) {
				t.Fatalf("error output %q, sent %q", stderr.Bytes(), msg)
			}
			if msg[0] != gpuportal.StreamStderr && !bytes.Equal(c.buf, msg[1:]) {
				t.Fatalf("main stream %q, sent %q", c.buf, msg)
			}
		}
		if c.eof {
			// Once ended, Read says so and reads nothing more.
			c.buf = nil
			if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
				t.Fatalf("Read after the end = %d, %v", n, err)
			}
		}
	})
}
