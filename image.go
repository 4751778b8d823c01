package gpuportal

import (
	"regexp"
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
