package gpuportal

import (
	"regexp"
	"strings"
	"time"
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

// CatalogEntry is one model in one region as an orchestrator's adapter
// (SkyPilot, dstack) reads it to choose where to launch: GET /catalog.
type CatalogEntry struct {
	Model        string `json:"model"`
	Region       string `json:"region"`
	GPUName      string `json:"gpu_name"`
	GPUMemoryGiB int    `json:"gpu_memory_gib"`
	GPUsPerNode  int    `json:"gpus_per_node"`
	Price        Fen    `json:"price_per_gpu_hour_fen"`
	SpotPrice    Fen    `json:"spot_price_per_gpu_hour_fen"`
	// FreeNow: GPUs an on-demand launch can take now (idle, or spot that
	// gives way, beside every booked hour ahead); SpotFreeNow: idle GPUs
	// a spot launch can land on now.
	FreeNow     int `json:"free_now"`
	SpotFreeNow int `json:"spot_free_now"`
	// SpotInterruptionRate30d: the share of spot instances of the last
	// 30 days that were interrupted (0 to 1).
	SpotInterruptionRate30d float64 `json:"spot_interruption_rate_30d"`
	// NextFreeStart: the earliest start of a booking of one whole node
	// for the shortest booking allowed (nil: none within the range
	// offerings look at).
	NextFreeStart *time.Time `json:"next_free_start"`
	// ComputedAt: when these figures were read (they are cached briefly).
	ComputedAt time.Time `json:"computed_at"`
}
