package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// A customer's own images (POST /images from a volume's archive, GET
// /images with the catalog, DELETE /images/{id}); in the browser they are
// listed and imported on the volumes page, where the archives are.

// apiImages lists the catalog, and the caller's own images when signed in.
func (s *Server) apiImages(c echo.Context) error {
	ctx := c.Request().Context()
	if u := currentUser(c); u != nil {
		images, err := s.db.ImagesFor(ctx, u)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, images)
	}
	images, err := s.db.Images(ctx)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, images)
}

func (s *Server) apiImportImage(c echo.Context) error {
	var req gpuportal.ImageImport
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	im, err := s.db.ImportImage(c.Request().Context(), currentUser(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, im)
}

func (s *Server) apiPrivateImage(c echo.Context) error {
	im, err := s.db.PrivateImage(c.Request().Context(), currentUser(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, im)
}

func (s *Server) apiDeletePrivateImage(c echo.Context) error {
	if err := s.db.DeletePrivateImage(c.Request().Context(), currentUser(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// apiSaveInstanceImage is POST /instances/{id}/images: a private image of
// the instance's disk.
func (s *Server) apiSaveInstanceImage(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var req gpuportal.ImageSave
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	im, err := s.db.SaveInstanceImage(c.Request().Context(), currentUser(c), id, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, im)
}

// handleSaveInstanceImageForm is the instance page's "Save as image".
func (s *Server) handleSaveInstanceImageForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	lang := reqOf(c).lang
	im, err := s.db.SaveInstanceImage(c.Request().Context(), currentUser(c), id, gpuportal.ImageSave{Name: c.FormValue("name")})
	if err != nil {
		switch gpuportal.ErrorCode(err) {
		case gpuportal.ECONFLICT, gpuportal.EINVALID, gpuportal.EUNAVAILABLE:
			s.addFlash(c, "error", i18n.Error(lang, err))
			return redirect(c, fmt.Sprintf("/instances/%d", id))
		}
		return err
	}
	s.addFlash(c, "success", i18n.T(lang, "Image %s is being saved from instance #%d; it is listed with your images on the volumes page.", im.ID, id))
	return redirect(c, fmt.Sprintf("/instances/%d", id))
}

// handleImportImageForm is the volumes page's import form.
func (s *Server) handleImportImageForm(c echo.Context) error {
	volumeID, _ := strconv.ParseInt(strings.TrimSpace(c.FormValue("volume_id")), 10, 64)
	req := gpuportal.ImageImport{Name: c.FormValue("name"), VolumeID: volumeID, Path: strings.TrimSpace(c.FormValue("path"))}
	im, err := s.db.ImportImage(c.Request().Context(), currentUser(c), req)
	if err != nil {
		code := gpuportal.ErrorCode(err)
		if code == gpuportal.EINTERNAL {
			return err
		}
		form := templates.ImageImportForm{ImageImport: req, Errors: templates.FieldErrors{gpuportal.ErrorField(err): i18n.Error(reqOf(c).lang, err)}}
		return s.renderVolumesWith(c, statusOf[code], templates.VolumeForm{VolumeRequest: gpuportal.VolumeRequest{SizeGiB: 100}}, form)
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Image %s is being imported; it can be used once ready.", im.ID))
	return redirect(c, "/volumes#images")
}

func (s *Server) handleDeletePrivateImageForm(c echo.Context) error {
	id := c.Param("id")
	lang := reqOf(c).lang
	if err := s.db.DeletePrivateImage(c.Request().Context(), currentUser(c), id); err != nil {
		if gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
			return err
		}
		s.addFlash(c, "error", i18n.Error(lang, err))
	} else {
		s.addFlash(c, "success", i18n.T(lang, "Image %s deleted.", id))
	}
	return redirect(c, fmt.Sprintf("/volumes#%s", "images"))
}

// launchImages is what the launch, job and booking forms offer: the
// catalog and the user's own ready images.
func (s *Server) launchImages(c echo.Context) ([]gpuportal.Image, error) {
	if currentUser(c) == nil {
		return s.db.Images(c.Request().Context())
	}
	all, err := s.db.ImagesFor(c.Request().Context(), currentUser(c))
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, im := range all {
		if im.Status == gpuportal.ImageReady {
			out = append(out, im)
		}
	}
	return out, nil
}
