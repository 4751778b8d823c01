package web

import (
	"net/http"
	"net/url"
	"strconv"

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
			return c.Request().URL.Path
		}
		return c.Request().URL.Path + "?" + q.Encode()
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
