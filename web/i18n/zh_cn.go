package i18n

var zhCN = map[string]string{}
