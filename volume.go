package gpuportal

import (
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Volume is a customer's persistent disk in a region (DESIGN §2
// "Volumes"): billed per started hour for its size, mounted into any of
// their instances and job tasks there, reachable from the portal and SFTP
// whether or not an instance runs.
type Volume struct {
	ID     int64 `json:"id"`
	UserID int64 `json:"-"`
	// TeamID: the team it belongs to (nil: personal); CreatedBy: the
	// member who made it.
	TeamID    *int64 `json:"team_id"`
	CreatedBy *int64 `json:"created_by"`
	Name      string `json:"name"`
	Region    string `json:"region"`
	SizeGiB   int    `json:"size_gib"`
	// UsedBytes is what its files take, as the region's agents last
	// measured it (UsedAt; nil before the first measurement).
	UsedBytes int64      `json:"used_bytes"`
	UsedAt    *time.Time `json:"used_at,omitempty"`
	Status    string     `json:"status"`
	// MountedBy lists the instances that mount it and have not ended.
	MountedBy   []int64    `json:"mounted_by"`
	CostPerHour Fen        `json:"cost_fen_per_hour"`
	CreatedAt   time.Time  `json:"created_at"`
	SuspendedAt *time.Time `json:"suspended_at,omitempty"`
	DeleteAfter *time.Time `json:"delete_after,omitempty"` // when suspended: the day it is deleted
	// Enforced: the region's storage fails writes past the size (false:
	// sizes are only measured; EnforceNote says why).
	Enforced    bool   `json:"size_enforced"`
	EnforceNote string `json:"size_note,omitempty"`
}

// Volume statuses.
const (
	VolumeAvailable = "available" // no running instance mounts it
	VolumeInUse     = "in_use"    // mounted by an instance that has not ended
	VolumeSuspended = "suspended" // its owner's balance ran out: kept VolumeRetention, then deleted
)

// Volume rules.
const (
	// VolumeRetention is how long a volume whose owner's balance ran out
	// is kept before it is deleted; VolumeWarnBefore is when the owner is
	// told again.
	VolumeRetention  = 15 * 24 * time.Hour
	VolumeWarnBefore = 3 * 24 * time.Hour
	// VolumeMountRoot is where a volume is mounted unless a launch asks
	// for another path.
	VolumeMountRoot = "/data"
	// VolumeGID is the group every volume's files belong to inside a
	// container: workloads of one owner (each with a UID of its own) share
	// their volumes through it.
	VolumeGID = 65000
	// MaxVolumesPerLaunch bounds the volumes one launch mounts.
	MaxVolumesPerLaunch = 8
)

// VolumeRequest creates a volume.
type VolumeRequest struct {
	Name    string `json:"name" form:"name"`
	Region  string `json:"region" form:"region"`
	SizeGiB int    `json:"size_gib" form:"size_gib"`
}

var volumeName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Validate checks a new volume against the owner's quota (GiB for all
// their volumes together; have is what they hold already).
func (r *VolumeRequest) Validate(quotaGiB, haveGiB int) error {
	r.Name = strings.TrimSpace(r.Name)
	var errs ValidationErrors
	if !volumeName.MatchString(r.Name) {
		errs = append(errs, FieldErrorf(EINVALID, "name", "A volume name is 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit."))
	}
	if r.Region == "" {
		errs = append(errs, FieldErrorf(EINVALID, "region", "Choose a region."))
	}
	if err := ValidateVolumeSize(r.SizeGiB, quotaGiB, haveGiB); err != nil {
		errs = append(errs, err.(*Error))
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// ValidateVolumeSize checks a volume's size (new or grown): at least
// 1 GiB, and the owner's volumes together within their quota.
func ValidateVolumeSize(sizeGiB, quotaGiB, otherGiB int) error {
	if sizeGiB < 1 {
		return FieldErrorf(EINVALID, "size_gib", "A volume is at least 1 GiB.")
	}
	if otherGiB+sizeGiB > quotaGiB {
		return FieldErrorf(EPOLICY, "size_gib", "Your volumes may hold %d GiB together; you have %d GiB in others, so this one can be at most %d GiB.", quotaGiB, otherGiB, max(quotaGiB-otherGiB, 0))
	}
	return nil
}

// VolumeHourCost is one started hour of a volume of sizeGiB at
// pricePerGiBMonth (a month being 30 days = 720 hours). Fractions of a
// fen are not lost: carry (in 720ths of a fen) goes into the next hour,
// so a day of 100 GiB at 30 fen is exactly ¥1.00.
func VolumeHourCost(sizeGiB int, pricePerGiBMonth Fen, carry int64) (cost Fen, nextCarry int64) {
	n := int64(sizeGiB)*int64(pricePerGiBMonth) + carry
	return Fen(n / 720), n % 720
}

// VolumeHoursCost is hours started hours of a volume, from carry on
// (VolumeHourCost, hour after hour).
func VolumeHoursCost(sizeGiB int, pricePerGiBMonth Fen, carry int64, hours int) (cost Fen, nextCarry int64) {
	for range hours {
		var c Fen
		c, carry = VolumeHourCost(sizeGiB, pricePerGiBMonth, carry)
		cost += c
	}
	return cost, carry
}

// VolumeHoursDue is how many hours of a volume billed until billedUntil
// have started by now (0 when billedUntil is still ahead).
func VolumeHoursDue(billedUntil, now time.Time) int {
	if now.Before(billedUntil) {
		return 0
	}
	return int(now.Sub(billedUntil)/time.Hour) + 1
}

// VolumeCostPerHour is a volume's price per hour as shown (rounded up to
// the fen: what an hour may cost).
func VolumeCostPerHour(sizeGiB int, pricePerGiBMonth Fen) Fen {
	return Fen((int64(sizeGiB)*int64(pricePerGiBMonth) + 719) / 720)
}

// VolumeDeletion is what happens to a suspended volume at now: it is kept
// VolumeRetention after suspendedAt; the owner is warned VolumeWarnBefore
// that, once.
func VolumeDeletion(suspendedAt, now time.Time, warned bool) (deleteNow, warnNow bool) {
	deleteAt := suspendedAt.Add(VolumeRetention)
	if !now.Before(deleteAt) {
		return true, false
	}
	return false, !warned && !now.Before(deleteAt.Add(-VolumeWarnBefore))
}

// VolumeMount is one volume a launch mounts: by id, at MountPath (empty:
// /data/<name>).
type VolumeMount struct {
	ID        int64  `json:"id"`
	MountPath string `json:"mount_path,omitempty"`
}

// reservedMounts are paths a volume cannot be mounted over.
var reservedMounts = []string{"/", "/checkpoint", "/proc", "/sys", "/dev", "/etc", "/bin", "/sbin", "/usr", "/lib", "/lib64", "/tmp", "/var/tmp", "/.gpuportal"}

// ResolveMountPath is where a volume named name is mounted: the path
// asked (absolute, clean, not over the system's or the checkpoint's
// directories) or /data/<name>.
func ResolveMountPath(asked, name string, field string) (string, error) {
	if asked == "" {
		return VolumeMountRoot + "/" + name, nil
	}
	if !strings.HasPrefix(asked, "/") || path.Clean(asked) != asked || strings.ContainsAny(asked, ":,\x00\n") || len(asked) > 200 {
		return "", FieldErrorf(EINVALID, field, "A mount path is an absolute, clean path such as /data/%s.", name)
	}
	for _, r := range reservedMounts {
		if asked == r || (r != "/" && strings.HasPrefix(asked, r+"/")) {
			return "", FieldErrorf(EINVALID, field, "A volume cannot be mounted at %s.", asked)
		}
	}
	return asked, nil
}

// CleanVolumePath checks a path inside a volume as a customer gives it
// (the file manager's ?path=, relative to the volume) and returns it
// clean and relative ("." for the volume's top). ".." and absolute paths
// are refused here; symbolic links pointing out are refused where the
// files are (the agent opens every path inside an os.Root).
func CleanVolumePath(p string) (string, error) {
	if p == "" || p == "." || p == "/" {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || strings.Contains(p, "\\") {
		return "", FieldErrorf(EINVALID, "path", "A path is relative to the volume, such as data/train.csv.")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", FieldErrorf(EINVALID, "path", "A path cannot leave the volume (no '..').")
		}
	}
	if len(p) > 4096 {
		return "", FieldErrorf(EINVALID, "path", "The path is too long.")
	}
	return path.Clean(p), nil
}

// VolumeFile is one entry of a volume's directory.
type VolumeFile struct {
	Name       string    `json:"name"`
	Size       int64     `json:"size"`
	IsDir      bool      `json:"is_dir"`
	ModifiedAt time.Time `json:"modified_at"`
}

// InstanceVolume is a volume as an instance mounts it.
type InstanceVolume struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	MountPath string `json:"mount_path"`
	// SizeGiB is the volume's size now: the agent limits writes to it.
	SizeGiB int `json:"size_gib"`
}

// VolumeReport is what an agent says of its volume root (in a heartbeat,
// when it measured anew): whether the storage fails writes past a
// volume's size, why not, and each volume's usage.
type VolumeReport struct {
	Enforced bool          `json:"enforced"`
	Note     string        `json:"note,omitempty"`
	Usage    []VolumeUsage `json:"usage"`
}

// VolumeUsage is an agent's measurement of one volume in its root.
type VolumeUsage struct {
	ID        int64 `json:"id"`
	UsedBytes int64 `json:"used_bytes"`
}

// VolumeDirName is a volume's directory under an agent's volume root.
func VolumeDirName(id int64) string {
	return "vol-" + strconv.FormatInt(id, 10)
}
