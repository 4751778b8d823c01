package gpuportal

import (
	"strings"
	"testing"
)

func TestSignUpValidate(t *testing.T) {
	good := SignUp{Email: "a@example.com", Password: "0123456789", Name: "Ann", Phone: "+8613800138000"}
	for _, tt := range []struct {
		name  string
		edit  func(*SignUp)
		field string
	}{
		{"valid", func(*SignUp) {}, ""},
		{"no phone", func(s *SignUp) { s.Phone = "" }, ""},
		{"bad email", func(s *SignUp) { s.Email = "not-an-email" }, "email"},
		{"email with name", func(s *SignUp) { s.Email = "Ann <a@example.com>" }, "email"},
		{"email without dot", func(s *SignUp) { s.Email = "a@localhost" }, "email"},
		{"short password", func(s *SignUp) { s.Password = "123456789" }, "password"},
		{"long password", func(s *SignUp) { s.Password = strings.Repeat("x", 73) }, "password"},
		{"no name", func(s *SignUp) { s.Name = "" }, "name"},
		{"long name", func(s *SignUp) { s.Name = strings.Repeat("名", 101) }, "name"},
		{"bad phone", func(s *SignUp) { s.Phone = "call me" }, "phone"},
		{"short phone", func(s *SignUp) { s.Phone = "+123" }, "phone"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			tt.edit(&s)
			err := s.Validate()
			if got := ErrorField(err); got != tt.field {
				t.Fatalf("Validate() field = %q (%v); want %q", got, err, tt.field)
			}
			if err != nil && ErrorCode(err) != EINVALID {
				t.Fatalf("code = %s; want invalid_input", ErrorCode(err))
			}
		})
	}
}

func TestPasswordHashing(t *testing.T) {
	h, err := HashPassword("a long password")
	if err != nil {
		t.Fatal(err)
	}
	if !CheckPassword(h, "a long password") || CheckPassword(h, "a long passworD") {
		t.Fatal("CheckPassword disagrees with HashPassword")
	}
}

func TestSecrets(t *testing.T) {
	a, b := NewSecret("gpp_"), NewSecret("gpp_")
	if a == b || !strings.HasPrefix(a, "gpp_") || len(a) < 40 {
		t.Fatalf("NewSecret gave %q and %q", a, b)
	}
	if ha, again := HashSecret(a), HashSecret(a); ha == HashSecret(b) || ha != again {
		t.Fatal("HashSecret is not a function of its input")
	}
}

func TestCanSee(t *testing.T) {
	alice := &User{ID: 1, Role: RoleCustomer}
	admin := &User{ID: 9, Role: RoleAdmin}
	var system *User
	for _, tc := range []struct {
		who   *User
		owner int64
		want  bool
	}{
		{alice, 1, true},
		{alice, 2, false},
		{admin, 2, true},
		{system, 2, true},
	} {
		if got := tc.who.CanSee(tc.owner); got != tc.want {
			t.Errorf("%+v sees %d's: %v, want %v", tc.who, tc.owner, got, tc.want)
		}
	}
}
