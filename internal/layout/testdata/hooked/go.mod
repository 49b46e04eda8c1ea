module example.com/hooked

go 1.26
