package web

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/pkg/sftp"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// Volumes: the API and the /volumes pages. A volume's files are reached
// through an agent of its region over a session stream that speaks SFTP
// (the agent serves it inside an os.Root of the volume's directory); the
// portal is that stream's SFTP client, whether or not an instance runs.

func (s *Server) apiVolumes(c echo.Context) error {
	list, err := s.db.Volumes(c.Request().Context(), currentUser(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiCreateVolume(c echo.Context) error {
	var in gpuportal.VolumeRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	v, err := s.db.CreateVolume(c.Request().Context(), currentUser(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, v)
}

func (s *Server) apiVolume(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	v, err := s.db.Volume(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) apiResizeVolume(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var in struct {
		SizeGiB int `json:"size_gib"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	v, err := s.db.ResizeVolume(c.Request().Context(), currentUser(c), id, in.SizeGiB)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (s *Server) apiDeleteVolume(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.DeleteVolume(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// isVolumeUpload: a request whose body is a file for a volume (no body
// limit but the volume's free space).
func isVolumeUpload(c echo.Context) bool {
	r := c.Request()
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPut && strings.HasPrefix(p, "/api/v1/volumes/") && strings.HasSuffix(p, "/files/content"):
		return true
	case r.Method == http.MethodPost && strings.HasPrefix(p, "/volumes/") && strings.HasSuffix(p, "/files"):
		return true
	}
	return false
}

// volumeFiles is an SFTP client into one of the user's volumes, through
// an agent of its region; close it when done.
type volumeFiles struct {
	*sftp.Client
	done func()
}

func (f *volumeFiles) Close() {
	_ = f.Client.Close()
	f.done()
}

// openVolumeFiles opens a volume's files for reading, or for writing
// too (write): a suspended volume is read-only until its owner pays what
// it owes (its node refuses writes as well).
func (s *Server) openVolumeFiles(c echo.Context, id int64, write bool) (*volumeFiles, error) {
	user := currentUser(c)
	// The volume first: another's (or none) is 404 before any node is asked.
	v, err := s.db.Volume(c.Request().Context(), user, id)
	if err != nil {
		return nil, err
	}
	if write && v.Status == gpuportal.VolumeSuspended {
		return nil, gpuportal.Errorf(gpuportal.EFUNDS, "Volume %s is suspended: it is read-only until your balance pays what it owes.", v.Name)
	}
	conn, done, err := s.hub.Open(c.Request().Context(), user, 0, gpuportal.SessionRequest{Kind: gpuportal.SessionVolume, VolumeID: id, Group: gpuportal.NewSessionID()})
	if err != nil {
		return nil, err
	}
	client, err := sftp.NewClientPipe(conn, conn, sftp.UseConcurrentWrites(true))
	if err != nil {
		done()
		msg := conn.Failure()
		if msg == "" {
			msg = err.Error()
		}
		return nil, gpuportal.Errorf(gpuportal.EUNAVAILABLE, "The volume's node could not open it: %s.", msg)
	}
	return &volumeFiles{Client: client, done: done}, nil
}

// fileError turns what SFTP said of a path into the portal's errors.
func fileError(p string, err error) error {
	var st *sftp.StatusError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return gpuportal.FieldErrorf(gpuportal.ENOTFOUND, "path", "%s does not exist in this volume.", p)
	case errors.Is(err, fs.ErrPermission) || (errors.As(err, &st) && st.FxCode() == sftp.ErrSSHFxPermissionDenied):
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "path", "%s leads outside the volume (a symbolic link) and cannot be used.", p)
	case errors.As(err, &st) && st.FxCode() == sftp.ErrSSHFxFailure && strings.Contains(st.Error(), "no space left"):
		return gpuportal.FieldErrorf(gpuportal.ETOOLARGE, "path", "The volume is full: grow it, or delete files first.")
	case errors.As(err, &st):
		return gpuportal.FieldErrorf(gpuportal.ECONFLICT, "path", "%s: %s", p, st.Error())
	}
	return gpuportal.Errorf(gpuportal.EUNAVAILABLE, "The volume's node went away (%v); try again.", err)
}

// volumePath reads ?path= (relative to the volume; "..", absolute paths
// are refused here, symbolic links out by the agent).
func volumePath(c echo.Context) (string, error) {
	return gpuportal.CleanVolumePath(c.QueryParam("path"))
}

// listVolumeDir lists a directory of a volume, folders first.
func listVolumeDir(f *volumeFiles, p string) ([]gpuportal.VolumeFile, error) {
	infos, err := f.ReadDir("/" + p)
	if err != nil {
		return nil, fileError(p, err)
	}
	out := make([]gpuportal.VolumeFile, 0, len(infos))
	for _, info := range infos {
		out = append(out, gpuportal.VolumeFile{Name: info.Name(), Size: info.Size(), IsDir: info.IsDir(), ModifiedAt: info.ModTime().UTC()})
	}
	slices.SortStableFunc(out, func(a, b gpuportal.VolumeFile) int {
		if a.IsDir != b.IsDir {
			if a.IsDir {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// volumeFilesAt opens the files of the route's volume, with its ?path=
// checked first (no node is asked for a path that leaves the volume).
func (s *Server) volumeFilesAt(c echo.Context, write bool) (*volumeFiles, string, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, "", err
	}
	p, err := volumePath(c)
	if err != nil {
		return nil, "", err
	}
	f, err := s.openVolumeFiles(c, id, write)
	return f, p, err
}

func (s *Server) apiVolumeFiles(c echo.Context) error {
	f, p, err := s.volumeFilesAt(c, false)
	if err != nil {
		return err
	}
	defer f.Close()
	list, err := listVolumeDir(f, p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

// apiVolumeDownload streams a file of the volume.
func (s *Server) apiVolumeDownload(c echo.Context) error {
	f, p, err := s.volumeFilesAt(c, false)
	if err != nil {
		return err
	}
	defer f.Close()
	file, err := f.Open("/" + p)
	if err != nil {
		return fileError(p, err)
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return fileError(p, err)
	}
	if info.IsDir() {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "path", "%s is a folder; download its files one by one (or use sftp).", p)
	}
	h := c.Response().Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	c.Response().WriteHeader(http.StatusOK)
	_, _ = file.WriteTo(c.Response())
	return nil
}

// apiVolumeUpload stores the request body as a file of the volume
// (streamed; parents made; 413 past the free space).
func (s *Server) apiVolumeUpload(c echo.Context) error {
	if c.QueryParam("path") == "" {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "path", "Name the file to write, such as data/train.csv.")
	}
	f, p, err := s.volumeFilesAt(c, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if p == "." {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "path", "Name the file to write, such as data/train.csv.")
	}
	file, err := s.uploadInto(c, f, p, c.Request().Body, c.Request().ContentLength)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, file)
}

// uploadInto writes body (size bytes, -1 unknown) to p in the volume.
func (s *Server) uploadInto(c echo.Context, f *volumeFiles, p string, body io.Reader, size int64) (gpuportal.VolumeFile, error) {
	// A large upload takes longer than the server's read timeout.
	_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(12 * time.Hour))
	if vfs, err := f.StatVFS("/"); err == nil && vfs.Blocks > 0 && size > 0 && uint64(size) > vfs.FreeSpace() {
		return gpuportal.VolumeFile{}, gpuportal.FieldErrorf(gpuportal.ETOOLARGE, "path", "The file is %s and the volume has %s free: grow it, or delete files first.",
			templates.Bytes(size), templates.Bytes(int64(vfs.FreeSpace())))
	}
	if dir := path.Dir(p); dir != "." {
		if err := f.MkdirAll("/" + dir); err != nil {
			return gpuportal.VolumeFile{}, fileError(dir, err)
		}
	}
	file, err := f.OpenFile("/"+p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return gpuportal.VolumeFile{}, fileError(p, err)
	}
	_, copyErr := file.ReadFrom(body)
	closeErr := file.Close()
	if copyErr == nil {
		copyErr = closeErr
	}
	if copyErr != nil {
		_ = f.Remove("/" + p) // no half file left behind
		var st *sftp.StatusError
		if errors.As(copyErr, &st) {
			return gpuportal.VolumeFile{}, fileError(p, copyErr)
		}
		return gpuportal.VolumeFile{}, gpuportal.Errorf(gpuportal.EINVALID, "The upload of %s did not complete (%v); nothing was kept.", p, copyErr)
	}
	info, err := f.Stat("/" + p)
	if err != nil {
		return gpuportal.VolumeFile{}, fileError(p, err)
	}
	return gpuportal.VolumeFile{Name: p, Size: info.Size(), ModifiedAt: info.ModTime().UTC()}, nil
}

func (s *Server) apiVolumeDeleteFile(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	p, err := volumePath(c)
	if err != nil {
		return err
	}
	if err := s.deleteVolumeFile(c, id, p); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) deleteVolumeFile(c echo.Context, id int64, p string) error {
	if p == "." {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "path", "Name the file or folder to delete; to delete the volume, delete it on its page.")
	}
	f, err := s.openVolumeFiles(c, id, true)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Lstat("/" + p)
	if err != nil {
		return fileError(p, err)
	}
	if info.IsDir() {
		err = f.RemoveAll("/" + p)
	} else {
		err = f.Remove("/" + p)
	}
	return fileError(p, err)
}

// volumesIn lists the user's volumes of region ("": every region) that a
// launch can mount (not suspended).
func (s *Server) volumesIn(c echo.Context, region string) ([]gpuportal.Volume, error) {
	list, err := s.db.Volumes(c.Request().Context(), currentUser(c))
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, v := range list {
		if (region == "" || v.Region == region) && v.Status != gpuportal.VolumeSuspended {
			out = append(out, v)
		}
	}
	return out, nil
}

// volumeIDs reads a launch form's volume checkboxes: the ids, and the
// mounts they ask for (at /data/<name>); values that are not ids are left
// out (the caller compares the counts).
func volumeIDs(values []string) ([]int64, []gpuportal.VolumeMount) {
	var ids []int64
	var mounts []gpuportal.VolumeMount
	for _, v := range values {
		id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || id <= 0 {
			continue
		}
		ids = append(ids, id)
		mounts = append(mounts, gpuportal.VolumeMount{ID: id})
	}
	return ids, mounts
}

// formValues is every value of a form field (checkboxes).
func formValues(c echo.Context, name string) []string {
	if err := c.Request().ParseForm(); err != nil {
		return nil
	}
	return c.Request().Form[name]
}

// The pages.

func (s *Server) renderVolumes(c echo.Context, status int, form templates.VolumeForm) error {
	return s.renderVolumesWith(c, status, form, templates.ImageImportForm{})
}

// renderVolumesWith renders the volumes page with both of its forms.
func (s *Server) renderVolumesWith(c echo.Context, status int, form templates.VolumeForm, imageForm templates.ImageImportForm) error {
	ctx := c.Request().Context()
	user := currentUser(c)
	list, err := s.db.Volumes(ctx, user)
	if err != nil {
		return err
	}
	regions, err := s.db.Regions(ctx)
	if err != nil {
		return err
	}
	policies, err := s.db.Policies(ctx)
	if err != nil {
		return err
	}
	if form.Region == "" && len(regions) > 0 {
		form.Region = regions[0].ID
	}
	images, err := s.db.ImagesFor(ctx, user)
	if err != nil {
		return err
	}
	own := []gpuportal.Image{}
	for _, im := range images {
		if im.Owner == "me" {
			own = append(own, im)
		}
	}
	return s.render(c, status, templates.Volumes(templates.VolumesPage{Volumes: list, Regions: regions, Form: form,
		PricePerGiBMonth: gpuportal.Fen(policies.Global.VolumePricePerGiBMonthFen), Images: own, ImageForm: imageForm}))
}

func (s *Server) handleVolumesPage(c echo.Context) error {
	return s.renderVolumes(c, http.StatusOK, templates.VolumeForm{VolumeRequest: gpuportal.VolumeRequest{SizeGiB: 100}})
}

func (s *Server) handleCreateVolumeForm(c echo.Context) error {
	size, _ := strconv.Atoi(strings.TrimSpace(c.FormValue("size_gib")))
	req := gpuportal.VolumeRequest{Name: c.FormValue("name"), Region: c.FormValue("region"), SizeGiB: size}
	v, err := s.db.CreateVolume(c.Request().Context(), currentUser(c), req)
	if err != nil {
		code := gpuportal.ErrorCode(err)
		if code == gpuportal.EINTERNAL {
			return err
		}
		form := templates.VolumeForm{VolumeRequest: req, Errors: templates.FieldErrors{}}
		var list gpuportal.ValidationErrors
		if errors.As(err, &list) {
			for _, e := range list {
				form.Errors[e.Field] = i18n.Error(reqOf(c).lang, e)
			}
		} else {
			form.Errors[gpuportal.ErrorField(err)] = i18n.Error(reqOf(c).lang, err)
		}
		return s.renderVolumes(c, statusOf[code], form)
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Volume %s created (%d GiB in %s).", v.Name, v.SizeGiB, v.Region))
	return redirect(c, fmt.Sprintf("/volumes/%d", v.ID))
}

func (s *Server) handleResizeVolumeForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	size, _ := strconv.Atoi(strings.TrimSpace(c.FormValue("size_gib")))
	lang := reqOf(c).lang
	if v, err := s.db.ResizeVolume(c.Request().Context(), currentUser(c), id, size); err != nil {
		if gpuportal.ErrorCode(err) == gpuportal.EINTERNAL || gpuportal.ErrorCode(err) == gpuportal.ENOTFOUND {
			return err
		}
		s.addFlash(c, "error", i18n.Error(lang, err))
	} else {
		s.addFlash(c, "success", i18n.T(lang, "Volume %s is now %d GiB.", v.Name, v.SizeGiB))
	}
	return redirect(c, fmt.Sprintf("/volumes/%d", id))
}

func (s *Server) handleDeleteVolumeForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	lang := reqOf(c).lang
	if err := s.db.DeleteVolume(c.Request().Context(), currentUser(c), id); err != nil {
		if gpuportal.ErrorCode(err) == gpuportal.EINTERNAL || gpuportal.ErrorCode(err) == gpuportal.ENOTFOUND {
			return err
		}
		s.addFlash(c, "error", i18n.Error(lang, err))
		return redirect(c, fmt.Sprintf("/volumes/%d", id))
	}
	s.addFlash(c, "info", i18n.T(lang, "Volume deleted; its files are removed from the storage."))
	return redirect(c, "/volumes")
}

// handleVolumePage is a volume's file manager at ?path=.
func (s *Server) handleVolumePage(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	v, err := s.db.Volume(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	page := templates.VolumePage{Volume: *v, Path: "."}
	status := http.StatusOK
	p, err := volumePath(c)
	if err == nil {
		page.Path = p
		var f *volumeFiles
		if f, err = s.openVolumeFiles(c, id, false); err == nil {
			page.Files, err = listVolumeDir(f, p)
			f.Close()
		}
	}
	if err != nil {
		if gpuportal.ErrorCode(err) == gpuportal.EINTERNAL {
			return err
		}
		page.Error = i18n.Error(reqOf(c).lang, err)
		status = statusOf[gpuportal.ErrorCode(err)]
	}
	return s.render(c, status, templates.Volume(page))
}

// handleUploadForm takes the file manager's upload without JavaScript: a
// multipart form, each file streamed into the folder shown.
func (s *Server) handleUploadForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	dir, err := volumePath(c)
	if err != nil {
		return err
	}
	back := fmt.Sprintf("/volumes/%d?path=%s", id, urlQueryEscape(dir))
	lang := reqOf(c).lang
	mr, err := c.Request().MultipartReader()
	if err != nil {
		return gpuportal.Errorf(gpuportal.EINVALID, "Choose a file to upload.")
	}
	if err := checkFormCSRF(c, mr); err != nil {
		return err
	}
	f, err := s.openVolumeFiles(c, id, true)
	if err != nil {
		return err
	}
	defer f.Close()
	var names []string
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		} else if err != nil {
			return gpuportal.Errorf(gpuportal.EINVALID, "The upload did not complete: %v.", err)
		}
		if part.FormName() != "file" || part.FileName() == "" {
			continue
		}
		name, err := gpuportal.CleanVolumePath(path.Join(dir, path.Base(part.FileName())))
		if err != nil {
			return err
		}
		if _, err := s.uploadInto(c, f, name, part, -1); err != nil {
			s.addFlash(c, "error", i18n.Error(lang, err))
			return redirect(c, back)
		}
		names = append(names, path.Base(name))
	}
	if len(names) == 0 {
		s.addFlash(c, "error", i18n.T(lang, "Choose a file to upload."))
	} else {
		s.addFlash(c, "success", i18n.T(lang, "Uploaded %s.", strings.Join(names, ", ")))
	}
	return redirect(c, back)
}

func (s *Server) handleDeleteFileForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	p, err := gpuportal.CleanVolumePath(c.FormValue("path"))
	if err != nil {
		return err
	}
	lang := reqOf(c).lang
	if err := s.deleteVolumeFile(c, id, p); err != nil {
		if gpuportal.ErrorCode(err) == gpuportal.EINTERNAL {
			return err
		}
		s.addFlash(c, "error", i18n.Error(lang, err))
	} else {
		s.addFlash(c, "info", i18n.T(lang, "Deleted %s.", p))
	}
	return redirect(c, fmt.Sprintf("/volumes/%d?path=%s", id, urlQueryEscape(path.Dir(p))))
}
