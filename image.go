package gpuportal

import (
	"regexp"
	"strconv"
	"strings"
)

// Image is an admin-curated container image customers run their instances
// in, e.g. "PyTorch 2.5 / CUDA 12.4". Nodes preload the images (nothing is
// pulled at launch); an instance records the reference it was launched
// with.
type Image struct {
	ID          string `json:"id"`        // short name customers pick, e.g. "pytorch-2.5"
	Name        string `json:"name"`      // e.g. "PyTorch 2.5 / CUDA 12.4"
	Reference   string `json:"reference"` // e.g. "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
	Description string `json:"description"`
	// Owner is "me" for the caller's private image ("" for the catalog's,
	// which are always ready and free); a private one has its region,
	// status (saving, ready, failed with Error) and size.
	Owner     string `json:"owner,omitempty"`
	Region    string `json:"region,omitempty"`
	Status    string `json:"status"`
	SizeBytes int64  `json:"size_bytes,omitempty"`
	Error     string `json:"error,omitempty"`
}

var (
	imageIDPattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	imageRefPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:@+-]{0,254}$`)
)

// Validate checks an image before it enters the catalog.
func (im *Image) Validate() error {
	im.ID, im.Name = strings.TrimSpace(im.ID), strings.TrimSpace(im.Name)
	im.Reference, im.Description = strings.TrimSpace(im.Reference), strings.TrimSpace(im.Description)
	if !imageIDPattern.MatchString(im.ID) {
		return FieldErrorf(EINVALID, "id", "The image id must be 1 to 64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit.")
	}
	if im.Name == "" || len(im.Name) > 100 {
		return FieldErrorf(EINVALID, "name", "The image name must be 1 to 100 characters.")
	}
	if !imageRefPattern.MatchString(strings.ToLower(im.Reference)) || strings.Contains(im.Reference, "..") {
		return FieldErrorf(EINVALID, "reference", "The reference must be an image reference such as registry.example.com/team/image:tag.")
	}
	if len(im.Description) > 500 {
		return FieldErrorf(EINVALID, "description", "The description must be at most 500 characters.")
	}
	return nil
}

// Private images: a customer's own, imported from a `docker save` or OCI
// archive in one of their volumes (POST /images), kept in the region's
// storage and loaded on any node of the region when first used. Their id
// is "img-<n>"; GET /images lists them beside the catalog with Owner "me".
const (
	ImageSaving = "saving"
	ImageReady  = "ready"
	ImageFailed = "failed"
)

// MaxImageArchiveBytes bounds an imported archive (100 GiB): a file
// larger is refused as the import's reason.
const MaxImageArchiveBytes int64 = 100 << 30

// ImageImport asks for a private image from a volume's archive.
type ImageImport struct {
	Name     string `json:"name"`
	VolumeID int64  `json:"volume_id"`
	Path     string `json:"path"`
}

// Validate checks an import's shape (the volume and the archive itself
// are checked by the store and the agent).
func (r *ImageImport) Validate() error {
	r.Name = strings.TrimSpace(r.Name)
	if r.Name == "" || len(r.Name) > 100 {
		return FieldErrorf(EINVALID, "name", "The image name must be 1 to 100 characters.")
	}
	if r.VolumeID <= 0 {
		return FieldErrorf(EINVALID, "volume_id", "Name the volume that holds the archive (volume_id).")
	}
	p, err := CleanVolumePath(r.Path)
	if err != nil {
		return err
	}
	if p == "." {
		return FieldErrorf(EINVALID, "path", "Name the archive's file in the volume, such as images/app.tar.")
	}
	r.Path = p
	return nil
}

// PrivateImageID is the API id of private image n.
func PrivateImageID(n int64) string { return "img-" + strconv.FormatInt(n, 10) }

// ParsePrivateImageID reads "img-<n>".
func ParsePrivateImageID(id string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, "img-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n > 0
}

// PrivateImageReference is the reference a node loads private image n
// under: a local name no registry serves, so it is never pulled. token is
// the image's own random tag, so that a node never takes another image
// of the same number (a portal's database made anew, another portal on
// the same machine) for it.
func PrivateImageReference(n int64, token string) string {
	return "localhost/gpuportal-private/" + PrivateImageID(n) + ":" + token
}

// PrivateImageRepository is where every tag of private image n lives.
func PrivateImageRepository(n int64) string {
	return "localhost/gpuportal-private/" + PrivateImageID(n)
}

// PrivateImageArchive is where private image n's archive lives under an
// agent's --image-root.
func PrivateImageArchive(n int64) string {
	return "private/" + PrivateImageID(n) + ".tar"
}

// PrivateImageOf reads a private image's number back from its reference
// (an instance records the reference it runs).
func PrivateImageOf(ref string) (int64, bool) {
	rest, ok := strings.CutPrefix(ref, "localhost/gpuportal-private/")
	if !ok {
		return 0, false
	}
	id, _, _ := strings.Cut(rest, ":")
	return ParsePrivateImageID(id)
}

// ImageImportOrder tells an agent to make a private image: from an
// archive in a volume (VolumeID, Path), or from an instance's disk
// (InstanceID: running on the node, or stopped with its disk kept, over
// BaseImage, the image it runs in, of DiskGiB).
type ImageImportOrder struct {
	ImageID int64 `json:"image_id"`
	// Reference is what the image is loaded as (PrivateImageReference).
	Reference  string `json:"reference"`
	VolumeID   int64  `json:"volume_id,omitempty"`
	Path       string `json:"path,omitempty"`
	InstanceID int64  `json:"instance_id,omitempty"`
	BaseImage  string `json:"base_image,omitempty"`
	DiskGiB    int    `json:"disk_gib,omitempty"`
	MaxBytes   int64  `json:"max_bytes"`
}

// ImageSave asks for a private image of an instance's disk.
type ImageSave struct {
	Name string `json:"name"`
}

// ImageReport is an agent's word on an import it was asked for.
type ImageReport struct {
	ImageID   int64  `json:"image_id"`
	Status    string `json:"status"` // ready or failed
	SizeBytes int64  `json:"size_bytes,omitempty"`
	Error     string `json:"error,omitempty"`
}
