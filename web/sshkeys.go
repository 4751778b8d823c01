package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// sshKeyJSON is POST /api/v1/ssh-keys's body.
type sshKeyJSON struct {
	Name      string `json:"name"`
	PublicKey string `json:"public_key"`
}

func (s *Server) apiAddSSHKey(c echo.Context) error {
	var in sshKeyJSON
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	k, err := s.db.AddSSHKey(c.Request().Context(), currentUser(c), in.Name, in.PublicKey)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, k)
}

func (s *Server) apiSSHKeys(c echo.Context) error {
	list, err := s.db.SSHKeys(c.Request().Context(), currentUser(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiDeleteSSHKey(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.DeleteSSHKey(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) handleAddSSHKeyForm(c echo.Context) error {
	k, err := s.db.AddSSHKey(c.Request().Context(), currentUser(c), c.FormValue("name"), c.FormValue("public_key"))
	if err != nil {
		return s.settingsFormError(c, err, templates.SettingsPage{SSHKeyName: c.FormValue("name"), SSHKeyLine: c.FormValue("public_key")}, "ssh_")
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "SSH key %q added (%s).", k.Name, k.Fingerprint))
	return redirect(c, "/settings#ssh-keys")
}

func (s *Server) handleDeleteSSHKeyForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.DeleteSSHKey(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	s.addFlash(c, "info", i18n.T(reqOf(c).lang, "SSH key deleted."))
	return redirect(c, "/settings#ssh-keys")
}
