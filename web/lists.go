package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/web/templates"
)

// The API's lists, all alike: ?limit= (1 to maxListLimit, default
// defaultListLimit) rows from ?offset= (0 on), newest first unless the
// route says otherwise, and how many there are in all in X-Total-Count.
// No list stops silently: a client pages on until offset reaches the
// total.
const (
	defaultListLimit = 50
	maxListLimit     = 500
)

// listParams reads ?limit= and ?offset= (400 naming the parameter when
// either is not a number in range) and asks the store for the total.
func listParams(c echo.Context) (store.Page, error) {
	limit, offset, err := pageParams(c, maxListLimit)
	if err != nil {
		return store.Page{}, err
	}
	if c.QueryParam("limit") == "" {
		limit = defaultListLimit
	}
	var total int
	return store.Page{Limit: limit, Offset: offset, Total: &total}, nil
}

// withTotal answers a page of a list with its total in X-Total-Count.
func withTotal(c echo.Context, p store.Page, list any) error {
	c.Response().Header().Set("X-Total-Count", strconv.Itoa(*p.Total))
	return c.JSON(http.StatusOK, list)
}

// Lists show listPageSize rows a page; ?page=N (from 1) picks one.
const listPageSize = 25

// pageParam is the list page asked for (1 when none or nonsense).
func pageParam(c echo.Context) int {
	page, err := strconv.Atoi(c.QueryParam("page"))
	if err != nil || page < 1 {
		return 1
	}
	return min(page, 10_000)
}

// pagerFor links the pages around page of the list at c's address (its
// other parameters kept); more says whether an older page exists.
func pagerFor(c echo.Context, page int, more bool) templates.Pager {
	return pagerForPath(c, c.Request().URL.Path, page, more)
}

// pagerForPath is pagerFor with the list's pages at path (a live part's
// pager leads to its page, not to the part).
func pagerForPath(c echo.Context, path string, page int, more bool) templates.Pager {
	at := func(n int) string {
		q := url.Values{}
		for k, v := range c.QueryParams() {
			q[k] = v
		}
		if n == 1 {
			q.Del("page")
		} else {
			q.Set("page", strconv.Itoa(n))
		}
		if len(q) == 0 {
			return path
		}
		return path + "?" + q.Encode()
	}
	var p templates.Pager
	if page > 1 {
		p.Newer = at(page - 1)
	}
	if more {
		p.Older = at(page + 1)
	}
	return p
}

// tabParam is the list tab asked for: one of allowed, the first when none.
func tabParam(c echo.Context, allowed ...string) (string, error) {
	tab := c.QueryParam("tab")
	if tab == "" {
		return allowed[0], nil
	}
	for _, a := range allowed {
		if tab == a {
			return tab, nil
		}
	}
	return "", gpuportal.FieldErrorf(gpuportal.EINVALID, "tab", "Unknown list %q.", tab)
}

// ownerParam is an admin's ?user_id= on a list (its page or the API's): only that customer's rows
// (nil: everybody's). A customer's lists are always their own, so a
// well-formed one is ignored for them.
func (s *Server) ownerParam(c echo.Context) (*gpuportal.User, error) {
	v := c.QueryParam("user_id")
	if v == "" {
		return nil, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "user_id", "user_id is a user's number, e.g. 12.")
	}
	if !currentUser(c).IsAdmin() {
		return nil, nil
	}
	u, err := s.db.UserByID(c.Request().Context(), id)
	if err != nil {
		return nil, err
	}
	return u, nil
}

// ownerID is the filter's user id (0: none).
func ownerID(owner *gpuportal.User) int64 {
	if owner == nil {
		return 0
	}
	return owner.ID
}

// withOwner keeps an admin's ?user_id= on a list's link (a tab, the live
// list).
func withOwner(link string, owner *gpuportal.User) string {
	if owner == nil {
		return link
	}
	sep := "?"
	if strings.Contains(link, "?") {
		sep = "&"
	}
	return link + sep + "user_id=" + strconv.FormatInt(owner.ID, 10)
}

// labelParam reads a list's ?label=k=v filters (repeatable; every one
// must match): 400 naming "label" when one is malformed.
func labelParam(c echo.Context) (gpuportal.LabelFilter, error) {
	var values []string
	for _, v := range c.QueryParams()["label"] {
		if v = strings.TrimSpace(v); v != "" {
			values = append(values, v)
		}
	}
	return gpuportal.ParseLabelFilter(values)
}

// withLabels carries a list's label filter into a link of it.
func withLabels(link string, f gpuportal.LabelFilter) string {
	for _, s := range f.Strings() {
		sep := "?"
		if strings.Contains(link, "?") {
			sep = "&"
		}
		link += sep + "label=" + url.QueryEscape(s)
	}
	return link
}
