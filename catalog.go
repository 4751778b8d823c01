package gpuportal

import (
	"regexp"
	"strings"
)

// Model is a GPU model that can be rented, e.g. "a100-80g".
type Model struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	MemoryGiB int    `json:"memory_gib"`
	// ListPrice is the on-demand price of one GPU for one hour.
	ListPrice Fen `json:"list_price_per_gpu_hour_fen"`
}

// Region is a site/zone; every node belongs to one.
type Region struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	TimeZone string `json:"time_zone"`
	// WorkloadEnv are the variables every workload of the region gets,
	// from its admins: a package mirror or a proxy (PIP_INDEX_URL,
	// HTTPS_PROXY…), as platforms in mainland China set them.
	WorkloadEnv map[string]string `json:"workload_env,omitempty"`
}

// MaxRegionEnv bounds a region's workload variables.
const MaxRegionEnv = 32

var regionEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ValidateWorkloadEnv checks a region's workload variables: names of
// letters, digits and '_', values of at most 1024 printable characters,
// and nothing the platform sets or that changes what runs (PATH, LD_*,
// HOME, the GPU variables, GPUPORTAL_*).
func ValidateWorkloadEnv(env map[string]string) error {
	if len(env) > MaxRegionEnv {
		return FieldErrorf(EINVALID, "workload_env", "A region sets at most %d variables.", MaxRegionEnv)
	}
	for name, value := range env {
		upper := strings.ToUpper(name)
		switch {
		case !regionEnvName.MatchString(name):
			return FieldErrorf(EINVALID, "workload_env", "%q is not a variable name (letters, digits and _).", name)
		case upper == "PATH" || upper == "HOME" || upper == "CUDA_VISIBLE_DEVICES" || strings.HasPrefix(upper, "LD_") ||
			strings.HasPrefix(upper, "NVIDIA_") || strings.HasPrefix(upper, "GPUPORTAL_") || strings.HasPrefix(upper, "AWS_EC2_METADATA"):
			return FieldErrorf(EINVALID, "workload_env", "%s is the platform's to set.", name)
		case len(value) > 1024:
			return FieldErrorf(EINVALID, "workload_env", "The value of %s is longer than 1024 characters.", name)
		}
		for _, r := range value {
			if r < 0x20 || r == 0x7f {
				return FieldErrorf(EINVALID, "workload_env", "The value of %s has a control character.", name)
			}
		}
	}
	return nil
}

// MaxListPrice bounds what an admin can set as a list price per GPU-hour
// (¥100,000) so a typo cannot produce absurd bills or overflow totals.
const MaxListPrice Fen = 100_000_00

// ValidateListPrice checks a list price an admin wants to set.
func ValidateListPrice(p Fen) error {
	if p <= 0 {
		return FieldErrorf(EINVALID, "list_price_per_gpu_hour_fen", "The list price must be more than zero.")
	}
	if p > MaxListPrice {
		return FieldErrorf(EINVALID, "list_price_per_gpu_hour_fen", "The list price must be at most %s per GPU-hour.", MaxListPrice)
	}
	return nil
}
