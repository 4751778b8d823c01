package web

import (
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/web/templates"
)

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
