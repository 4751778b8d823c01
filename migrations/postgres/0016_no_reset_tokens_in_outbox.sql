-- Reset links are made by the dispatcher as it sends them: the tokens that
-- older rows kept in the outbox are wiped (a pending one gets a new link).
UPDATE notifications SET params = '{}' WHERE kind = 'password_reset';
