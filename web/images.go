package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// The image catalog: GET /images for everyone, admins add and remove
// images (API and /admin/images).

func (s *Server) apiAddImage(c echo.Context) error {
	// What an admin names of a catalog image (its status, owner and size
	// are a private image's, never set here).
	var in struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		Reference   string `json:"reference"`
		Description string `json:"description"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	im, err := s.db.AddImage(c.Request().Context(), currentUser(c), gpuportal.Image{ID: in.ID, Name: in.Name, Reference: in.Reference, Description: in.Description})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, im)
}

func (s *Server) apiDeleteImage(c echo.Context) error {
	if err := s.db.DeleteImage(c.Request().Context(), currentUser(c), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) renderImages(c echo.Context, status int, form templates.ImageForm) error {
	images, err := s.db.Images(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, status, templates.Images(templates.ImagesPage{Images: images, Form: form}))
}

func (s *Server) handleImagesPage(c echo.Context) error {
	return s.renderImages(c, http.StatusOK, templates.ImageForm{})
}

func (s *Server) handleAddImageForm(c echo.Context) error {
	in := gpuportal.Image{ID: c.FormValue("id"), Name: c.FormValue("name"), Reference: c.FormValue("reference"), Description: c.FormValue("description")}
	if _, err := s.db.AddImage(c.Request().Context(), currentUser(c), in); err != nil {
		code := gpuportal.ErrorCode(err)
		if code == gpuportal.EINTERNAL || code == gpuportal.EFORBIDDEN {
			return err
		}
		form := templates.ImageForm{Image: in, Errors: templates.FieldErrors{}}
		form.Errors[gpuportal.ErrorField(err)] = i18n.Error(reqOf(c).lang, err)
		return s.renderImages(c, statusOf[code], form)
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Image %s added to the catalog.", in.ID))
	return redirect(c, "/admin/images")
}

func (s *Server) handleDeleteImageForm(c echo.Context) error {
	if err := s.db.DeleteImage(c.Request().Context(), currentUser(c), c.Param("id")); err != nil {
		return err
	}
	s.addFlash(c, "info", i18n.T(reqOf(c).lang, "Image %s removed from the catalog; instances running it are not affected.", c.Param("id")))
	return redirect(c, "/admin/images")
}
