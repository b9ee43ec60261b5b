# The module's .so takes nothing from libxxhash at run time: xxHash's
# state layout is private to the header version it was compiled with,
# so the module must compile every XXH function it uses (XXH_INLINE_ALL)
# rather than call a shared library that may be another version.

use strict;
use warnings;
use Test::More;

my ($so) = grep { /prefix_aware/ } split ' ',
    ($ENV{TEST_NGINX_LOAD_MODULES} // '');

plan skip_all => 'TEST_NGINX_LOAD_MODULES names no prefix_aware module'
    unless defined $so;

ok(-f $so, "module $so exists") or BAIL_OUT("no module at $so");

my $needed = `readelf -d '$so' 2>&1`;
is($?, 0, 'readelf reads the module');
unlike($needed, qr/NEEDED.*libyajl/, 'the module does not link libyajl (it parses JSON itself)');
unlike($needed, qr/NEEDED.*libxxhash/, 'the module does not link libxxhash');

my @undef = grep { /XXH/ } split /\n/, `nm -D --undefined-only '$so' 2>&1`;
is($?, 0, 'nm reads the module');
is_deeply(\@undef, [], 'no XXH symbol is left to a shared library');

my @defined = grep { /\bXXH3_64bits_update\b/ } split /\n/,
    `nm -D --defined-only '$so' 2>&1`;
is_deeply(\@defined, [], 'no XXH symbol is exported either');

done_testing();
