package main

import (
	"fmt"
	"strconv"
	"strings"

	"gpuportal"
)

// teamArg reads --team and `gpu team use`: a team's id, or me (0).
func teamArg(v string) (int64, error) {
	if v == "me" || v == "0" {
		return 0, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("not a team id: %q", v)
	}
	return id, nil
}

// team is `gpu team …`: teams and their members; `use` makes every later
// command act for a team (X-Team) until `gpu team use me`.
func (c *cli) teams(args []string) error {
	sub, args := subcommand(args)
	switch sub {
	case "list":
		var list []gpuportal.Team
		if err := c.call("GET", "/teams", nil, &list); err != nil {
			return err
		}
		cfg, _ := c.config()
		var rows [][]string
		for _, t := range list {
			balance, mark := "", ""
			if t.Balance != nil {
				balance = t.Balance.Available.String()
			}
			if t.ID == cfg.Team {
				mark = "*"
			}
			rows = append(rows, []string{mark + strconv.FormatInt(t.ID, 10), t.Name, t.Role, strconv.Itoa(t.Members), balance})
		}
		return c.print(list, []string{"ID", "NAME", "ROLE", "MEMBERS", "BALANCE"}, rows)
	case "create":
		if len(args) != 1 {
			return usageError{c.T("team create needs the team's NAME")}
		}
		var t gpuportal.Team
		if err := c.call("POST", "/teams", map[string]string{"name": args[0]}, &t); err != nil {
			return err
		}
		if c.json {
			return c.print(t, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Team %d (%s) made; you own it. Invite with: gpu team invite %d EMAIL ROLE", t.ID, t.Name, t.ID))
		return nil
	case "use":
		if len(args) != 1 {
			return usageError{c.T("team use needs a team's ID, or me")}
		}
		id, err := teamArg(args[0])
		if err != nil {
			return usageError{c.T("team use needs a team's ID, or me")}
		}
		cfg, err := c.config()
		if err != nil {
			return err
		}
		if id != 0 {
			var t gpuportal.Team
			if err := c.call("GET", fmt.Sprintf("/teams/%d", id), nil, &t); err != nil {
				return err
			}
			fmt.Fprintln(c.out, c.T("From now on gpu acts for team %s (%s); gpu team use me goes back to your own account.", t.Name, t.Role))
		} else {
			fmt.Fprintln(c.out, c.T("From now on gpu acts for your own account."))
		}
		cfg.Team = id
		return c.saveConfig(cfg)
	case "members":
		id, err := c.idArg(args, "team")
		if err != nil {
			return err
		}
		var list []gpuportal.TeamMemberInfo
		if err := c.call("GET", fmt.Sprintf("/teams/%d/members", id), nil, &list); err != nil {
			return err
		}
		var rows [][]string
		for _, m := range list {
			limit := "-"
			if m.MonthlySpendLimit != nil {
				limit = m.MonthlySpendLimit.String()
			}
			rows = append(rows, []string{strconv.FormatInt(m.UserID, 10), m.Email, m.Role, m.SpentThisMonth.String(), limit, strconv.Itoa(m.RunningGPUs), countOrDash(m.MaxRunningGPUs), countOrDash(m.ReservedRunningGPUs)})
		}
		return c.print(list, []string{"USER", "EMAIL", "ROLE", "SPENT THIS MONTH", "MONTHLY LIMIT", "GPUS", "GPU LIMIT", "GUARANTEED"}, rows)
	case "invite":
		if len(args) != 3 {
			return usageError{c.T("team invite needs a team ID, an EMAIL and a ROLE (admin, billing, member or viewer)")}
		}
		id, err := c.idArg(args[:1], "team")
		if err != nil {
			return err
		}
		var inv gpuportal.TeamInvitation
		if err := c.call("POST", fmt.Sprintf("/teams/%d/invitations", id), map[string]string{"email": args[1], "role": args[2]}, &inv); err != nil {
			return err
		}
		if c.json {
			return c.print(inv, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Invited %s as %s until %s; send them this link: %s", inv.Email, inv.Role, inv.ExpiresAt.Local().Format("2006-01-02 15:04"), inv.URL))
		return nil
	case "accept":
		if len(args) != 1 {
			return usageError{c.T("team accept needs the invitation's link or token")}
		}
		token := args[0][strings.LastIndex(args[0], "/")+1:]
		var out struct {
			TeamID int64  `json:"team_id"`
			Role   string `json:"role"`
		}
		if err := c.call("POST", "/invitations/"+token+"/accept", nil, &out); err != nil {
			return err
		}
		if c.json {
			return c.print(out, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("You joined team %d as %s; act for it with --team %d or gpu team use %d.", out.TeamID, out.Role, out.TeamID, out.TeamID))
		return nil
	case "limit":
		fs := c.flags("team limit")
		spend := fs.String("monthly", "", "")
		gpus := fs.String("gpus", "", "")
		share := fs.String("share", "", "")
		role := fs.String("role", "", "")
		usage := usageError{c.T("team limit needs a team ID and a member's USER id, then --monthly YUAN, --gpus N, --share N (GPUs guaranteed) or --role ROLE (none: no limit)")}
		if len(args) < 2 {
			return usage
		}
		id, err1 := strconv.ParseInt(args[0], 10, 64)
		user, err2 := strconv.ParseInt(args[1], 10, 64)
		if err1 != nil || err2 != nil || fs.Parse(args[2:]) != nil || (*spend == "" && *gpus == "" && *share == "" && *role == "") {
			return usage
		}
		body := map[string]any{}
		if *role != "" {
			body["role"] = *role
		}
		switch *spend {
		case "":
		case "none":
			body["monthly_spend_limit_fen"] = nil
		default:
			f, err := gpuportal.ParseYuan(*spend)
			if err != nil {
				return usageError{c.T("--monthly is an amount in yuan, like 500, or none")}
			}
			body["monthly_spend_limit_fen"] = int64(f)
		}
		for flag, field := range map[string]string{"gpus": "max_running_gpus", "share": "reserved_running_gpus"} {
			switch v := fs.Lookup(flag).Value.String(); v {
			case "":
			case "none":
				body[field] = nil
			default:
				n, err := strconv.Atoi(v)
				if err != nil {
					return usageError{c.T("--%s is a number of GPUs, or none", flag)}
				}
				body[field] = n
			}
		}
		var m gpuportal.TeamMemberInfo
		if err := c.call("PUT", fmt.Sprintf("/teams/%d/members/%d", id, user), body, &m); err != nil {
			return err
		}
		return c.print(m, []string{"USER", "EMAIL", "ROLE"}, [][]string{{strconv.FormatInt(m.UserID, 10), m.Email, m.Role}})
	case "remove":
		if len(args) != 2 {
			return usageError{c.T("team remove needs a team ID and a member's USER id (your own: leave the team)")}
		}
		id, err1 := strconv.ParseInt(args[0], 10, 64)
		user, err2 := strconv.ParseInt(args[1], 10, 64)
		if err1 != nil || err2 != nil {
			return usageError{c.T("team remove needs a team ID and a member's USER id (your own: leave the team)")}
		}
		if err := c.call("DELETE", fmt.Sprintf("/teams/%d/members/%d", id, user), nil, nil); err != nil {
			return err
		}
		fmt.Fprintln(c.out, c.T("Member %d is out of team %d.", user, id))
		return nil
	}
	return usageError{c.T("unknown team command %q", sub)}
}

// countOrDash prints an optional count ("-": none).
func countOrDash(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}
