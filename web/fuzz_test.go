package web

import (
	"bytes"
	"testing"

	"gpuportal"
)

// (DESIGN §8: parsers are fuzzed) The agent protocol's bodies — what a
// node (or whoever holds a node's token) sends — never panic the strict
// decoder, and a refusal is always invalid_input, never an internal error.
func FuzzAgentProtocolJSON(f *testing.F) {
	f.Add([]byte(`{"gpus":[{"uuid":"GPU-1","utilization_percent":50}],"workloads":[{"instance_id":1,"attempt":1,"state":"running"}],"wait_seconds":10}`))
	f.Add([]byte(`{"workloads":[{"instance_id":-1,"exit_code":1e99}]}`))
	f.Add([]byte(`{"volumes":{"enforced":true,"usage":[{"volume_id":1,"used_bytes":-5}]}}`))
	f.Add([]byte(`[{"a":{"b":{"c":[[[[[[[[]]]]]]]]}}}]`))
	f.Add([]byte(`{"hostname":"\u0000","gpus":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dst := range []any{&gpuportal.AgentHeartbeat{}, &gpuportal.AgentRegistration{}} {
			if err := decodeStrict(bytes.NewReader(body), dst); err != nil && gpuportal.ErrorCode(err) != gpuportal.EINVALID {
				t.Fatalf("decoding %q into %T: %v", body, dst, err)
			}
		}
	})
}
