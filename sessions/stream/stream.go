// Package stream is the wire of a session between the portal and a node's
// agent: a WebSocket whose binary messages carry the session's bytes (the
// first byte says which stream: input, output or error output) and whose
// text messages carry control (gpuportal.SessionControl as JSON). Both
// ends use it: the portal reads the output and writes the input, the agent
// the other way round.
package stream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/coder/websocket"

	"gpuportal"
)

// StreamInput marks a binary message of input (portal → agent).
const StreamInput byte = 0

// chunk is the most bytes one message carries (well under the read limit).
const chunk = 256 << 10

// Conn is one end of a session stream. Read returns the bytes of the
// other end's main stream (output at the portal, input at the agent) and
// io.EOF once it has no more; Write sends this end's main stream.
type Conn struct {
	ws  *websocket.Conn
	ctx context.Context
	out byte // the stream byte this end's Write sends

	// Stderr receives the other end's error output (at the portal).
	Stderr io.Writer
	// OnControl is called, from Read, for each control message but Exit
	// and EOF (resizes, signals at the agent).
	OnControl func(gpuportal.SessionControl)

	wmu    sync.Mutex
	wbuf   []byte // the message being written (under wmu)
	buf    []byte
	rbuf   []byte // the last message read, reused for the next once buf is spent
	eof    bool
	closed bool // the other end went away (not only its input)
	exit   *int
	fail   string
}

// Portal wraps the portal's end: Write sends input.
func Portal(ctx context.Context, ws *websocket.Conn) *Conn {
	ws.SetReadLimit(chunk + 1024)
	return &Conn{ws: ws, ctx: ctx, out: StreamInput, Stderr: io.Discard}
}

// Agent wraps the agent's end: Write sends output.
func Agent(ctx context.Context, ws *websocket.Conn) *Conn {
	ws.SetReadLimit(chunk + 1024)
	return &Conn{ws: ws, ctx: ctx, out: gpuportal.StreamStdout, Stderr: io.Discard}
}

// Read reads the other end's main stream.
func (c *Conn) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if c.eof {
			return 0, io.EOF
		}
		typ, msg, err := c.readMessage()
		if err != nil {
			c.eof, c.closed = true, true
			if websocket.CloseStatus(err) != -1 || errors.Is(err, io.EOF) || c.ctx.Err() != nil {
				return 0, io.EOF
			}
			return 0, err
		}
		if err := c.take(typ == websocket.MessageText, msg); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf) // none with an empty p: WriteTo only fills buf
	c.buf = c.buf[n:]
	return n, nil
}

// readMessage reads the next message into rbuf, which it reuses: a
// message is only read once the last one's bytes were all taken (buf is
// empty), and a fresh allocation per message was most of the copy path's
// garbage at 100 MB/s.
func (c *Conn) readMessage() (websocket.MessageType, []byte, error) {
	typ, r, err := c.ws.Reader(c.ctx)
	if err != nil {
		return typ, nil, err
	}
	msg := c.rbuf[:0]
	for {
		if len(msg) == cap(msg) {
			msg = append(msg, 0)[:len(msg)] // grow (the read limit bounds it)
		}
		n, err := r.Read(msg[len(msg):cap(msg)])
		msg = msg[:len(msg)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return typ, nil, err
		}
	}
	c.rbuf = msg
	return typ, msg, nil
}

// AwaitClose reads on after the other end's main stream ended (its EOF:
// `ssh -n`, or input that simply ran out) until the stream itself closes
// or ctx ends: whatever data still comes is dropped, controls (signals)
// still reach OnControl. The agent waits on it to hang up a command whose
// customer went away after its input ended. Call it from the goroutine
// that reads; Closed reports true after it.
func (c *Conn) AwaitClose() {
	for {
		typ, msg, err := c.ws.Read(c.ctx)
		if err != nil {
			c.eof, c.closed = true, true
			return
		}
		if typ != websocket.MessageText || c.OnControl == nil {
			continue
		}
		var ctl gpuportal.SessionControl
		if json.Unmarshal(msg, &ctl) == nil && ctl.Exit == nil && ctl.Error == "" && !ctl.EOF {
			c.OnControl(ctl)
		}
	}
}

// take is one message from the other end: a control (text: JSON), or
// bytes of its main stream (kept in buf) or of its error output (to
// Stderr), by the first byte. What it cannot read it drops: the other end
// is a node or a customer, and nothing it sends may crash this one.
func (c *Conn) take(text bool, msg []byte) error {
	if text {
		var ctl gpuportal.SessionControl
		if json.Unmarshal(msg, &ctl) != nil {
			return nil
		}
		switch {
		case ctl.Exit != nil:
			c.exit, c.eof = ctl.Exit, true
		case ctl.Error != "":
			c.fail, c.eof = ctl.Error, true
		case ctl.EOF:
			c.eof = true
		case c.OnControl != nil:
			c.OnControl(ctl)
		}
		return nil
	}
	if len(msg) == 0 {
		return nil
	}
	if msg[0] == gpuportal.StreamStderr {
		_, err := c.Stderr.Write(msg[1:])
		return err
	}
	c.buf = msg[1:]
	return nil
}

// WriteTo copies the other end's main stream to w a message at a time
// (io.Copy uses it: no second copy, one write per message).
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for {
		if len(c.buf) == 0 {
			if _, err := c.Read(nil); err == io.EOF {
				return n, nil
			} else if err != nil {
				return n, err
			}
		}
		m, err := w.Write(c.buf)
		n += int64(m)
		c.buf = c.buf[m:]
		if err != nil {
			return n, err
		}
	}
}

// ReadFrom sends what r gives in messages of up to a chunk (io.Copy uses
// it: a reader with more buffered fills one message, not many small ones).
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	buf := make([]byte, chunk)
	var n int64
	for {
		m, err := r.Read(buf)
		if m > 0 {
			if _, werr := c.Write(buf[:m]); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
	}
}

// Write sends this end's main stream.
func (c *Conn) Write(p []byte) (int, error) { return c.send(c.out, p) }

// WriteStderr sends error output (the agent's end).
func (c *Conn) WriteStderr(p []byte) (int, error) { return c.send(gpuportal.StreamStderr, p) }

// Stderr returns a writer of error output (the agent's end).
func (c *Conn) StderrWriter() io.Writer { return writerFunc(c.WriteStderr) }

func (c *Conn) send(stream byte, p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := 0
	for len(p) > 0 {
		part := p[:min(len(p), chunk)]
		c.wbuf = append(append(c.wbuf[:0], stream), part...) // reused: Write is done with it on return
		if err := c.ws.Write(c.ctx, websocket.MessageBinary, c.wbuf); err != nil {
			return n, err
		}
		n += len(part)
		p = p[len(part):]
	}
	return n, nil
}

// Control sends a control message.
func (c *Conn) Control(ctl gpuportal.SessionControl) error {
	raw, err := json.Marshal(ctl)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.Write(c.ctx, websocket.MessageText, raw)
}

// CloseWrite tells the other end this end sends no more (EOF).
func (c *Conn) CloseWrite() error { return c.Control(gpuportal.SessionControl{EOF: true}) }

// Closed reports, once Read returned io.EOF, whether that was the other
// end going away rather than the end of its input.
func (c *Conn) Closed() bool { return c.closed }

// Exit is the exit status the agent sent (nil if none came: the stream
// broke, or it carries a TCP connection).
func (c *Conn) Exit() *int { return c.exit }

// Failure is why the agent could not start the session ("" if it did).
func (c *Conn) Failure() string { return c.fail }

// Close ends the stream.
func (c *Conn) Close() error { return c.ws.Close(websocket.StatusNormalClosure, "") }

// CloseNow drops the stream without the closing handshake.
func (c *Conn) CloseNow() error { return c.ws.CloseNow() }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
